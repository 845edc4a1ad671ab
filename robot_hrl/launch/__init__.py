"""Launching the node graph: its one description (graph.py) and the ROS-free launcher (`robot-hrl launch`)."""
