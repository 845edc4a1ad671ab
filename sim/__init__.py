"""Training side: batched torch environments, PPO, PyBullet world, evaluation. Imports robot_hrl."""
