"""After a run: the text report, the dedicated-core replay, the timing rules replay
and simulate share, the network models.
"""
