"""The rotors as the shield's dead reckoning sees them: the robot's actuator chain on Python floats.

The chain itself (firmware mixer, power-distribution cap, thrust -> speed map, motor lag, rotor
wrench) is written once, in ``robot_hrl/robots/<robot>/actuators.py``, and found through the
registry :func:`robot_hrl.robots.actuator_chain.chain_of`; PyBullet and the training step run the
same source. This module only holds one airframe's chain state on floats (the nominal airframe:
the chain's ``PARAMETERS`` at their nominal values) and steps it as PyBullet does: the command
given once per control period, then ``substeps`` physics steps of the motors.

Why rotor speeds, not a wrench-space lag: the rotors' speeds lag, not their thrusts. A first-order
lag of the wrench (what the shield's own actuator estimate uses, with the slowest motor designed
for) put the body-rate estimate 0.4 rad/s off within 50 ms after a hard roll, and the attitude tens
of degrees off within half a second (issue #16); on the chain the prediction 0.2 s ahead of hard
manoeuvres matches the nominal PyBullet robot, which runs the same chain, to 1e-3 rad/s and 1 mm
(tests/test_dead_reckoning.py).
"""

from __future__ import annotations

from robot_hrl.robots.actuator_chain import MATH, chain_of


class RotorModel:
    """One nominal airframe's actuator chain, stepped on Python floats.

    Args:
        robot: the robot's parameters (its ``name`` selects the chain).
        period_s: the control period, s.
        substeps: physics steps per control period (the PyBullet robot: 500 Hz under 100 Hz control: 5).
    """

    def __init__(self, robot, period_s: float, substeps: int):
        self.chain = chain_of(robot.name)
        """The robot's actuator chain module (the one every simulator runs)."""
        self.k = self.chain.constants(robot)
        self.substeps = int(substeps)
        self.substep_s = period_s / self.substeps
        """One physics step, s."""
        params = {p.name: float(p.nominal(self.k)) for p in self.chain.PARAMETERS}
        self.derived = self.chain.derive(params, self.k, self.substep_s, MATH)
        """The nominal airframe's per-step quantities (``chain.derive``)."""
        self.weight_n = float(robot.weight_n)

    def initial_state(self) -> dict:
        """The chain's state holding the robot's weight (``chain.initial_state``)."""
        return dict(self.chain.initial_state(self.weight_n, self.derived, self.k, MATH))

    def command(self, wrench, state) -> tuple:
        """What the firmware sends the motors for ``wrench`` [T N, tau_x, tau_y, tau_z N m] in ``state``."""
        return self.chain.command(tuple(float(c) for c in wrench), state, self.derived, self.k, MATH)

    def substep(self, state, command, thrust_gains=None) -> tuple[dict, list[float]]:
        """One physics step: the chain's new state and the rotors' wrench [T, tau_x, tau_y, tau_z] on the body.
        ``thrust_gains``: a lift multiplier per rotor (ground effect), applied to the thrust and its moments, not to
        the rotors' drag torque (as the PyBullet robot applies it)."""
        sub = self.chain.substep(state, command, self.derived, self.k, MATH)
        tx, ty, tz = sub.torque_b
        if thrust_gains is None:
            return sub.state, [float(sub.thrust_n), float(tx), float(ty), float(tz)]
        lifted = tuple(f * g for f, g in zip(sub.rotor_thrusts_n, thrust_gains))
        thrust, tx, ty, _ = self.chain.rotor_wrench(lifted, self.derived["torque_coefficient"], self.k)
        return sub.state, [float(thrust), float(tx), float(ty), float(tz)]

    def settle(self, outputs) -> dict:
        """The chain's state after ``outputs`` (wrenches, oldest first, one control period each), from the
        state holding the weight (a warm-up long against the motor lag makes the start irrelevant)."""
        state = self.initial_state()
        for wrench in outputs:
            cmd = self.command(wrench, state)
            for _ in range(self.substeps):
                state, _ = self.substep(state, cmd)
        return state

    def wrench(self, state) -> list[float]:
        """The wrench the rotors put on the body in ``state`` (a zero-length step of the motors: the
        chain's substep with its command the state's hold command, ``chain.hold_command``)."""
        hold = self.chain.hold_command(state, self.derived, self.k, MATH)
        _, wrench = self.substep(state, hold)
        return wrench
