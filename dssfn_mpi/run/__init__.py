"""A live run's life: its MPI facts and the doctor, set-up, the layer loop and its step,
the observers, checkpoints, stops and the stuck-write watchdog.
"""
