"""FA-3's ping-pong named barriers (pipeline._Turns): consumer warpgroups issue their GEMM
groups in turn, consumer 0 first, so a consumer that is ready early waits for the one before it."""
import simpy

from iosim.sim.pipeline import TENSOR, _Turns


def issues(ready_at: list, rounds: int):
    env = simpy.Environment()
    turns = _Turns(env, len(ready_at))
    log, stalls = [], []

    def consumer(c):
        stall = [0.0] * 4
        yield env.timeout(ready_at[c])
        for _ in range(rounds):
            yield from turns.wait(c, stall)
            log.append((env.now, c))
            turns.pass_on()
            yield env.timeout(1.0)                 # its GEMMs and softmax until the next issue
        stalls.append((c, stall[TENSOR]))
    for c in range(len(ready_at)):
        env.process(consumer(c))
    env.run()
    return log, dict(stalls)


def test_a_consumer_ready_first_waits_for_consumer_0():
    log, stall = issues([5.0, 0.0, 0.0], rounds=2)
    assert [c for _, c in log] == [0, 1, 2, 0, 1, 2]
    assert log[:3] == [(5.0, 0), (5.0, 1), (5.0, 2)]
    assert stall[1] == 5.0 and stall[2] == 5.0 and stall[0] == 0.0


def test_a_late_consumer_holds_up_the_ones_behind_it():
    log, _ = issues([0.0, 3.0, 0.0], rounds=1)
    assert log == [(0.0, 0), (3.0, 1), (3.0, 2)]
