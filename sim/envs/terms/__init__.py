"""Observation, reward and termination terms: small pure functions composed by configuration."""
