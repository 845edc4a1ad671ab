"""Ray casts: the batched torch rangers against PyBullet's rayTestBatch on the same rooms and poses,
and against hand-computed distances."""

from __future__ import annotations

import math

import numpy as np
import pybullet
import pytest
import torch
from pybullet_utils import bullet_client

from robot_hrl.geometry import quat_from_euler_rpy
from robot_hrl.robots.crazyflie_2x.rangers import CRAZYFLIE_RANGERS
from robot_hrl.world.rooms import generate_room
from sim.envs.nav_rooms import RoomPool
from sim.envs.ranging import RangeSensorArray, ray_box_entry
from sim.pybullet.ranging import PyBulletRangers, build_enclosure
from sim.pybullet.scene import build_world


def _torch_ranges(pool, ids, pos, quat, rays):
    array = RangeSensorArray.from_specs(CRAZYFLIE_RANGERS, rays)
    ids = torch.as_tensor(ids)
    return array.true_ranges(torch.as_tensor(pos, dtype=torch.float32), torch.as_tensor(quat, dtype=torch.float32),
                             pool.box_lower[ids], pool.box_upper[ids], pool.box_valid[ids], pool.room_lower[ids],
                             pool.room_upper[ids]).numpy()


def test_hand_computed_distances():
    room = generate_room("sparse", 0)
    pool = RoomPool.from_rooms([room])
    (x1, y1, z1) = room.world.bounds.max
    # a pose 1 m from the south-west corner, level, yawed 90 degrees: front looks +y, left looks -x
    quat = quat_from_euler_rpy(0.0, 0.0, math.pi / 2)
    pos = np.array([[1.0, 1.0, 1.0]])
    single = _torch_ranges(pool, [0], pos, quat[None], 1)[0]
    # no obstacle at that spot? then front sees the north wall unless a box is in the way
    boxes = [(o.lower, o.upper) for o in room.world.obstacles]
    def expect(direction):
        best = math.inf
        o, d = pos[0], np.asarray(direction, dtype=float)
        for lo, hi in boxes:
            with np.errstate(divide="ignore"):
                t1, t2 = (lo - o) / d, (hi - o) / d
            tn, tf = np.nanmax(np.minimum(t1, t2)), np.nanmin(np.maximum(t1, t2))
            if tf >= tn and tf >= 0:
                best = min(best, max(tn, 0.0))
        with np.errstate(divide="ignore"):
            t_room = min(((np.array(room.world.bounds.max) - o) / d)[d > 0].tolist() + ((np.array(room.world.bounds.min) - o) / d)[d < 0].tolist())
        return min(best, t_room)
    expected = [expect(v) for v in ([0, 1, 0], [0, -1, 0], [-1, 0, 0], [1, 0, 0], [0, 0, 1], [0, 0, -1])]
    np.testing.assert_allclose(single, expected, rtol=1e-5, atol=1e-5)
    assert single[4] == pytest.approx(z1 - 1.0) and single[5] == pytest.approx(1.0)


def test_slab_test_edge_cases():
    lower = torch.tensor([[[1.0, -1.0, -1.0]]])
    upper = torch.tensor([[[2.0, 1.0, 1.0]]])
    o = torch.tensor([[[0.0, 0.0, 0.0], [1.5, 0.0, 0.0], [0.0, 2.0, 0.0], [3.0, 0.0, 0.0]]])
    d = torch.tensor([[[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]])
    t = ray_box_entry(o, d, lower, upper)[0]
    assert t[0] == pytest.approx(1.0)          # straight hit
    assert t[1] == 0.0                          # starts inside
    assert math.isinf(t[2]) and math.isinf(t[3])  # passes beside, box behind
    assert math.isinf(ray_box_entry(o, d, lower, upper, torch.tensor([[False]]))[0, 0])  # padding


@pytest.mark.parametrize("density", ["sparse", "dense"])
def test_torch_and_pybullet_agree_on_the_same_rooms_and_poses(density):
    rooms = [generate_room(density, s) for s in range(3)]
    pool = RoomPool.from_rooms(rooms)
    rng = np.random.default_rng(0)
    for k, room in enumerate(rooms):
        client = bullet_client.BulletClient(connection_mode=pybullet.DIRECT)
        try:
            build_world(client, room.world)
            build_enclosure(client, room.world)
            rangers = PyBulletRangers(client, CRAZYFLIE_RANGERS, rays_per_sensor=5, start_offset_m=0.0)
            poses, quats = [], []
            while len(poses) < 40:
                p = np.array([rng.uniform(0.2, 9.8), rng.uniform(0.2, 9.8), rng.uniform(0.3, 2.2)])
                if room.world.collides(p, margin=0.1):
                    continue
                poses.append(p)
                quats.append(quat_from_euler_rpy(*rng.uniform(-0.4, 0.4, 2), rng.uniform(-math.pi, math.pi)))
            torch_r = _torch_ranges(pool, [k] * len(poses), np.array(poses), np.array(quats), 5)
            bullet_r = np.array([rangers.true_ranges(p, q) for p, q in zip(poses, quats)])
            torch_r = np.where(torch_r > 4.0, np.inf, torch_r)
            both = np.isfinite(torch_r) & np.isfinite(bullet_r)
            assert np.array_equal(np.isfinite(torch_r), np.isfinite(bullet_r)) or np.all(
                np.abs(np.where(np.isfinite(torch_r), torch_r, bullet_r) - 4.0)[np.isfinite(torch_r) != np.isfinite(bullet_r)] < 1e-3)
            diff = np.abs(torch_r[both] - bullet_r[both])
            # Bullet's ray test against box shapes agrees to float rounding except for rays grazing an edge
            assert np.mean(diff < 1e-3) > 0.98 and diff.max() < 1e-2, diff.max()
            assert both.mean() > 0.5
        finally:
            client.disconnect()


def test_noise_and_limits_follow_the_description():
    array = RangeSensorArray.from_specs(CRAZYFLIE_RANGERS, 1)
    true = torch.tensor([[0.01, 1.0, 2.5, 3.9, 4.2, math.inf]]).repeat(20000, 1)
    g = torch.Generator().manual_seed(0)
    out = array.readings(true, g)
    assert torch.all(out[:, 0] == 0.04) and torch.all(out[:, 4:] == 4.0)
    assert torch.all((out >= 0.04) & (out <= 4.0))
    spec = CRAZYFLIE_RANGERS[0]
    for col, d in ((1, 1.0), (2, 2.5)):
        assert out[:, col].std().item() == pytest.approx(float(spec.noise.std_m(d)), rel=0.05)
        assert out[:, col].mean().item() == pytest.approx(d, abs=1e-3)
    assert torch.equal(array.readings(true, noise=False)[0], torch.tensor([0.04, 1.0, 2.5, 3.9, 4.0, 4.0]))


def test_pybullet_readings_with_the_robot_in_the_scene():
    """In the flying simulator the ray starts past the airframe, and the airframe itself is not seen."""
    from sim.pybullet import PyBulletQuadrotorSim

    room = generate_room("medium", 4)
    with PyBulletQuadrotorSim(world=room.world) as sim:
        build_enclosure(sim.bullet, room.world)
        state = sim.reset(room.start_w)
        rangers = PyBulletRangers(sim.bullet, CRAZYFLIE_RANGERS, seed=0)
        clean = rangers.readings(state.position_w, state.quat_wxyz, noise=False)
        pool = RoomPool.from_rooms([room])
        expected = np.minimum(_torch_ranges(pool, [0], state.position_w[None], state.quat_wxyz[None], 5)[0], 4.0)
        np.testing.assert_allclose(clean, expected, atol=2e-3)
        assert clean[5] == pytest.approx(room.start_w[2], abs=2e-3)
