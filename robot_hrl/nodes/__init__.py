"""Node programs of the runtime graph: planner, skill, emergency stop, teleop (written once against robot_hrl.transport)."""
