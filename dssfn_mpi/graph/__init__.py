"""The communication graph of the nodes: its families, its spectral facts, edge lists.
"""
