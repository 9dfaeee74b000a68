"""Scratch: per-call cost of each step of the floor's per-frame work, in-process, hot loop."""
import queue
import time
import timeit

import trio

from bench.clients.frames import correlation_id, wake_frame
from executor.decide.decision import Decider
from executor.recording.rows import wake_recv_row
from executor.wire.batch import next_complete_frame
from executor.wire.protocol import decode_wake, encode_accepted_ack, wake_message_of

frame = wake_frame(correlation_id("flood", 1), time.perf_counter_ns())
body = memoryview(frame)[4:]
decoded = decode_wake(body)
message = wake_message_of(decoded)
decider = Decider()
cid = decoded.correlation_id


class Peer:
    def __init__(self):
        self.view = memoryview(frame * 2)
        self.start = 0
        self.end = len(frame) * 2


peer = Peer()
send, receive = trio.open_memory_channel(10**9)
q = queue.SimpleQueue()
row = wake_recv_row(cid, 1, 2, 1000, True)
N = 200_000


def steps():
    yield "stamps (perf_counter_ns + time_ns)", lambda: (
        time.perf_counter_ns(),
        time.time_ns() // 1_000_000,
    )
    yield "next_complete_frame", lambda: next_complete_frame(peer)
    yield "decode_wake (strict)", lambda: decode_wake(body)
    yield "encode_accepted_ack", lambda: encode_accepted_ack(cid, 1787289600123)
    yield "wake_recv_row", lambda: wake_recv_row(cid, 1, 2, 1000, True)
    yield "wake_message_of", lambda: wake_message_of(decoded)
    yield "Decider.decide (shadow)", lambda: decider.decide(message)
    yield "SimpleQueue.put + qsize", lambda: (q.qsize(), q.put(row))
    yield "trio MemorySendChannel.send_nowait", lambda: send.send_nowait(row)


for name, fn in steps():
    best = min(timeit.repeat(fn, number=N, repeat=5)) / N * 1e6
    print(f"{name:40} {best:6.3f} us")
receive_nowait = receive.receive_nowait
best = min(timeit.repeat(receive_nowait, number=N, repeat=5)) / N * 1e6
print(f"{'trio MemoryReceiveChannel.receive_nowait':40} {best:6.3f} us")
