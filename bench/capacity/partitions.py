"""DynamoDB capacity in virtual time: units per partition key and per table each second,
and the throttling AWS applies when a request would exceed them.

Figures (AWS DynamoDB developer guide):
- a partition serves at most 1,000 write units and 3,000 read units a second ("Partitions
  and data distribution"; "Best practices for designing and using partition keys
  effectively"). One partition key value is never spread over partitions, so 1,000 WCU/s
  is the ceiling of any one key, however large the table: a hot key. A global secondary
  index has partitions of its own, keyed by the index's partition key: every entry of one
  `due_pk` (a minute bucket of a shard) is one key of the `due` index.
- an on-demand table (and each of its indexes) serves 4,000 write and 12,000 read units a
  second when new, and up to double its previous peak after that ("On-demand capacity mode:
  initial throughput"; "Peak traffic and scaling properties"); "throttling can occur if you
  exceed double your previous peak within 30 minutes": a new peak raises the limit only
  PEAK_SETTLE_SECONDS later.
- a throttled request consumes no capacity; a write to an index that is throttled is
  refused on the table too (index back pressure).

Model simplifications, each erring towards AWS's published limits rather than its unwritten
headroom: capacity is counted in whole-second windows of virtual time (no burst capacity,
no carry-over); every key is its own partition (adaptive capacity isolating hot keys makes
that true of a hot key; cold keys share partitions but never approach the limit at these
volumes); a peak is what a table served (offered load beyond its limit is throttled, not
served), and it doubles the limit exactly PEAK_SETTLE_SECONDS later (AWS may add capacity
sooner; it promises it no sooner).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

WCU_PER_PARTITION = 1_000.0
RCU_PER_PARTITION = 3_000.0
ON_DEMAND_INITIAL_WCU = 4_000.0
ON_DEMAND_INITIAL_RCU = 12_000.0
SPREAD_MAX_SECONDS = 60.0  # a sampled write stands for at most the minute before it
PEAK_SETTLE_SECONDS = 1_800  # "double your previous peak within 30 minutes" (see above)


@dataclass(frozen=True)
class Charge:
    """Units one request puts on one partition key of a table or index."""

    table: str  # the table, or `table/index`
    key: str  # the partition key's value
    units: float


@dataclass
class _Window:
    second: int = -1
    units: float = 0.0

    def at(self, second: int) -> float:
        return self.units if self.second == second else 0.0

    def add(self, second: int, units: float) -> float:
        if self.second != second:
            self.second, self.units = second, 0.0
        self.units += units
        return self.units


@dataclass
class _Scope:
    """Either every key's write or read units, with their ceilings."""

    key_limit: float
    table_initial: float
    keys: dict[tuple[str, str], _Window] = field(default_factory=dict)
    tables: dict[str, _Window] = field(default_factory=dict)
    table_peaks: dict[str, float] = field(default_factory=dict)  # served before the simulation
    # Each table's rising served peaks: (second, units served in it), each above the last.
    served_peaks: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    last_second: dict[str, tuple[int, float]] = field(default_factory=dict)  # offered, last closed
    peak_key_units: float = 0.0
    peak_key: str = ""
    peak_table_units: dict[str, float] = field(default_factory=dict)
    total_units: float = 0.0

    def table_limit(self, table: str, second: int) -> float:
        """Double the highest peak served at least PEAK_SETTLE_SECONDS before `second` (or
        before the simulation), at least the initial units."""
        peak = self.table_peaks.get(table, 0.0)
        for at, units in self.served_peaks.get(table, []):
            if at <= second - PEAK_SETTLE_SECONDS:
                peak = max(peak, units)
        return max(self.table_initial, 2 * peak)

    def load(self, table: str, second: int) -> float:
        """How much of its limit `table` was offered in the second before `second` (above 1:
        more than it serves)."""
        window = self.tables.get(table)
        if window is not None and window.second == second - 1:
            units = window.units
        else:
            at, units = self.last_second.get(table, (-1, 0.0))
            units = units if at == second - 1 else 0.0
        return units / self.table_limit(table, second - 1)

    def refusal(self, second: int, charges: list[Charge]) -> str | None:
        """Why these charges would be throttled now, or None if they fit."""
        by_key: dict[tuple[str, str], float] = defaultdict(float)
        by_table: dict[str, float] = defaultdict(float)
        for charge in charges:
            by_key[(charge.table, charge.key)] += charge.units
            by_table[charge.table] += charge.units
        for (table, key), units in by_key.items():
            if not key:
                continue  # on its table alone (`charge`)
            window = self.keys.get((table, key))
            if (window.at(second) if window else 0.0) + units > self.key_limit:
                kind = "Index" if "/" in table else "Table"
                return f"{kind}KeyRangeThroughputExceeded: {table} key {key}"
        for table, units in by_table.items():
            self._close_second(table, second)
            window = self.tables.get(table)
            if (window.at(second) if window else 0.0) + units > self.table_limit(table, second):
                return f"TableMaxOnDemandThroughputExceeded: {table}"
        return None

    def _close_second(self, table: str, second: int) -> None:
        window = self.tables.get(table)
        if window is not None and window.second not in (-1, second):
            self.last_second[table] = (window.second, window.units)
            served = min(window.units, self.table_limit(table, window.second))
            peaks = self.served_peaks.setdefault(table, [])
            if served > (peaks[-1][1] if peaks else 0.0):
                peaks.append((window.second, served))

    def charge(self, second: int, charges: list[Charge]) -> None:
        """Add the charges; one with key "" counts on its table alone (no partition key)."""
        for charge in charges:
            self._close_second(charge.table, second)
            table_units = self.tables.setdefault(charge.table, _Window()).add(second, charge.units)
            if table_units > self.peak_table_units.get(charge.table, 0.0):
                self.peak_table_units[charge.table] = table_units
            self.total_units += charge.units
            if not charge.key:
                continue
            units = self.keys.setdefault((charge.table, charge.key), _Window()).add(second, charge.units)
            if units > self.peak_key_units:
                self.peak_key_units, self.peak_key = units, f"{charge.table} {charge.key}"


class CapacityModel:
    """Write and read units per key and table each virtual second; throttling decisions."""

    def __init__(
        self,
        wcu_per_key: float = WCU_PER_PARTITION,
        rcu_per_key: float = RCU_PER_PARTITION,
        table_initial_wcu: float = ON_DEMAND_INITIAL_WCU,
        table_initial_rcu: float = ON_DEMAND_INITIAL_RCU,
    ) -> None:
        self.writes = _Scope(wcu_per_key, table_initial_wcu)
        self.reads = _Scope(rcu_per_key, table_initial_rcu)
        self.throttles: Counter[str] = Counter()  # by reason kind
        self.shadow_write_units = 0.0
        self._last_write: dict[tuple[str, str], float] = {}
        self._last_read: dict[tuple[str, str], float] = {}

    def admit_write(self, now_seconds: float, charges: list[Charge]) -> str | None:
        """Charge a write's units, or return why it is throttled (nothing charged)."""
        return self._admit(self.writes, now_seconds, charges)

    def admit_read(self, now_seconds: float, charges: list[Charge]) -> str | None:
        return self._admit(self.reads, now_seconds, charges)

    def _admit(self, scope: _Scope, now_seconds: float, charges: list[Charge]) -> str | None:
        second = int(now_seconds)
        refusal = scope.refusal(second, charges)
        if refusal is not None:
            self.throttles[refusal.split(":", 1)[0]] += 1
            return refusal
        scope.charge(second, charges)
        return None

    def add_shadow_writes(self, now_seconds: float, charges: list[Charge]) -> None:
        """Units of work the simulation does not run call by call (sampled load): charged
        whether or not they fit, so they crowd out the real calls as the real load would.
        See `_spread`: a real write's shadow is the writes since the last one on its key."""
        self.writes.charge(int(now_seconds), self._spread(self._last_write, now_seconds, charges))
        self.shadow_write_units += sum(charge.units for charge in charges)

    def add_shadow_reads(self, now_seconds: float, charges: list[Charge]) -> None:
        self.reads.charge(int(now_seconds), self._spread(self._last_read, now_seconds, charges))

    @staticmethod
    def _spread(last: dict[tuple[str, str], float], now: float, charges: list[Charge]) -> list[Charge]:
        """The share of shadow units that falls in the current second. A sampled job's write
        stands for the left-out jobs' writes on the same key (or table) since the previous
        sampled write there: spread evenly over that interval (at most SPREAD_MAX_SECONDS),
        the current second takes its part. Charging it all at the sampled instant would put
        a minute's load into one second: a hot key the full load never makes."""
        share = []
        for charge in charges:
            key = (charge.table, charge.key)
            previous = last.get(key)
            last[key] = now
            if previous is None or now <= previous:
                share.append(charge)  # the first on its key, or at the same instant: all now
                continue
            span = min(SPREAD_MAX_SECONDS, now - previous)
            in_second = now - max(now - span, float(int(now)))
            share.append(Charge(charge.table, charge.key, charge.units * in_second / span))
        return share

    def write_load(self, now_seconds: float, tables: tuple[str, ...]) -> float:
        """The most any of `tables` was offered of its write limit in the last whole second."""
        return max((self.writes.load(table, int(now_seconds)) for table in tables), default=0.0)

    def assume_previous_peak(self, wcu: dict[str, float], rcu: dict[str, float] | None = None) -> None:
        """An on-demand table (or index) that already served `wcu[table]` write units a
        second (`rcu[table]` read units): it serves up to double that at once."""
        self.writes.table_peaks.update(wcu)
        self.reads.table_peaks.update(rcu or {})
