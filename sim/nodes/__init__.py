"""The simulator on the ROS 2 graph (sim_node)."""
