"""The SSFN in one process: the forward pass, a layer's convex problem and its solvers,
the layer's statistics as one message, the centralized training, the model file and
the distance to the exact solution.
"""
