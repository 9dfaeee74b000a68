# Run from the repository root: PYTHONPATH=. .venv/bin/python docs/results/2026-12-01-fire-path/hot_decide.py
"""Hot-loop cost of a real fire's decide and audit stretch (what the cold path measures at 70+ us)."""
import statistics, time, dataclasses, trio
from executor.decide.decision import Decider, OrderRules
from executor.decide.risk import RiskGate, RiskLimits
from executor.decide.sizing import SizingConfig
from executor.exchange.account import AccountState
from executor.exchange.dispatcher import OrderDispatcher, OrderPolicy
from executor.exchange.stages import FireStamps
from executor.exchange.order_rows import order_row
from executor.recording.rows import OrderRowKind
from tests.support.inprocess import make_wake

big = 10**9
limits = RiskLimits(**{f.name: (big if f.type in ("int", "float") else getattr(RiskLimits(), f.name)) for f in dataclasses.fields(RiskLimits)})
limits = dataclasses.replace(limits, refire_cooldown_s=0)
risk = RiskGate(limits, frozenset({0}))
policy = OrderPolicy()
decider = Decider(rules=OrderRules(SizingConfig(), AccountState(), risk, policy.permission))
class Sink:
    def record_pending(self, row): pass
disp = OrderDispatcher.__new__(OrderDispatcher)
disp.policy = policy; disp.sink = Sink()
wake = make_wake("c", exchange_index=0)

def decide():
    return decider.decide(wake)
def audit(order):
    order.ticket.sending()
    prepared = disp.prepare(order.request)
    row = order_row(prepared, policy, OrderRowKind.PENDING, 0)
    disp.sink.record_pending(row)
    order.ticket.finished()
d, a = [], []
for i in range(3000):
    t0 = time.perf_counter_ns(); order = decide(); t1 = time.perf_counter_ns(); audit(order); t2 = time.perf_counter_ns()
    d.append(t1 - t0); a.append(t2 - t1)
print(f"hot decide p50 {statistics.median(d[500:])/1000:.1f} us, audit (ticket + ids + pending row, no channel) p50 {statistics.median(a[500:])/1000:.1f} us")
# a cold-ish pass: evict caches by sleeping and allocating between calls
cd, ca = [], []
for i in range(60):
    time.sleep(0.05); junk = [bytearray(1 << 20) for _ in range(8)]; del junk
    t0 = time.perf_counter_ns(); order = decide(); t1 = time.perf_counter_ns(); audit(order); t2 = time.perf_counter_ns()
    cd.append(t1 - t0); ca.append(t2 - t1)
print(f"after 50 ms asleep and 8 MiB touched: decide p50 {statistics.median(cd)/1000:.1f} us, audit p50 {statistics.median(ca)/1000:.1f} us")
