"""Name the broken part: the smallest set of components that explains a run's slow links.

Each link runs through components: the GPU (or, for host memory, the rank) at each end, the NIC
port at each end (inter-node links), the two hosts, the pair of hosts, and the link itself. A fault
in one component slows the links through it in one direction or both (a port paced on its way out
slows what its host sends, not what it receives), so each component is judged per direction: GPU
and NIC sending or receiving, host sending, receiving or both, a pair of hosts one way or both.

Every link is first placed against its class (fleet.py: x = log ratio to the class median, z = x
over the class's robust spread). A component is a candidate when, over its links:
- its level, the median x, is at least `min_drop` below its classes' medians;
- most of its links (`majority`, weighted) are slow at that level: below half of it;
- the shift is no chance: the median z times sqrt(n) / 1.2533 (the median's standard error) is
  below the normal quantile of `alpha` over every component tested (Bonferroni), so a single link
  must stand out by far more than a host of hundreds of links does.
Then a greedy set cover: the candidate whose slow links, not yet explained, weigh most, less
`fine_penalty` per link through it that ran fine, ties to the one with fewer links, is the next
suspect; until no candidate explains `min_gain`. A slow sender therefore explains its outgoing links
and the healthy receivers are never blamed; a NIC that carries two GPUs' links beats either GPU; a
GPU whose links within its node are slow too beats its NIC.

A link a screen re-measured alone weighs `remeasured_weight` where it stayed slow alone and
`recovered_weight` where alone it ran near its class (slow only under load); a component whose
slow links, re-measured (at least half of them), ran alone at their class's median or faster is
no candidate. Each suspect carries
the links it explains, those through it that ran fine, the wire counters, limits, warnings and
transports that support or contradict it, and a confidence: the share of its links that are slow x
n / (n + 1) (n its weighted slow links) x how consistent their slowdown is.
"""

from __future__ import annotations

import heapq
import math
import statistics
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ..files.rows import Row
from .fleet import MAD_TO_SIGMA, Bools, Floats, Ints, LinkTable, grouped_median, student_quantile, table
from .suspects import Attribution, Params, Suspect

KINDS = ("link", "pair", "nic", "gpu", "rank", "host")  # smallest first: the order of a tie
DIRECTIONS = ("send", "receive", "both")
MEDIAN_ERROR = 1.2533  # the standard error of a median of n normal values is this x sigma / sqrt(n)
# Link positions in the table (np.flatnonzero's), and a component's number for each.
Positions = npt.NDArray[np.intp]
WIRE_LOW = 0.9  # a wire ratio below: the counter the link claims saw under 90% of its bytes


@dataclass
class _Family:
    """Components of one kind and direction: for each link through one, its position and group."""

    kind: str  # "end" (a GPU or rank), "nic", "host", "pair", "link"
    direction: str
    positions: Positions
    groups: Ints | Positions
    count: int


@dataclass
class _Candidate:
    family: _Family
    members: Positions  # positions of its links
    slow: Bools  # per member: slow at its level
    level: float
    z: float
    fraction: float
    key: tuple[str, str, str | None, str | None]  # kind, host, device, peer

    def gain(self, weight: Floats, explained: Bools, penalty: float) -> float:
        w = weight[self.members]
        new = self.slow & ~explained[self.members]
        return float(w[new].sum() - penalty * w[~self.slow].sum())


def _weights(links: LinkTable, params: Params) -> Floats:
    """Per link: 1, or the re-measured weights where a screen measured it again alone."""
    weight = np.ones(len(links))
    again = ~np.isnan(links.alone)
    stayed = again & (links.alone < links.params.most)
    weight[stayed] = params.remeasured_weight
    weight[again & ~stayed] = params.recovered_weight
    return weight


def _families(links: LinkTable) -> list[_Family]:
    """Every component family, over the links of judged classes."""
    judged = np.flatnonzero(links.judged)
    src_host, dst_host = links.src_host[judged], links.dst_host[judged]
    inter = judged[src_host != dst_host]
    hosts = max(len(links.hosts), 1)
    found = [
        _Family("end", "send", judged, links.src_end[judged], len(links.ends)),
        _Family("end", "receive", judged, links.dst_end[judged], len(links.ends)),
        _Family("host", "send", judged, src_host, len(links.hosts)),
        _Family("host", "receive", judged, dst_host, len(links.hosts)),
        _Family(
            "host",
            "both",
            np.concatenate((judged, inter)),
            np.concatenate((src_host, links.dst_host[inter])),
            len(links.hosts),
        ),
        _Family("link", "send", judged, links.link[judged], int(links.link.max()) + 1 if len(links) else 0),
    ]
    for direction, column in (("send", links.src_nic), ("receive", links.dst_nic)):
        known = judged[column[judged] >= 0]
        found.append(_Family("nic", direction, known, column[known], len(links.nics)))
    a, b = links.src_host[inter].astype(np.int64), links.dst_host[inter].astype(np.int64)
    for direction, code in (("send", a * hosts + b), ("both", np.minimum(a, b) * hosts + np.maximum(a, b))):
        _unique, groups = np.unique(code, return_inverse=True)
        found.append(_Family("pair", direction, inter, groups.ravel(), len(_unique)))
    return found


def _key(links: LinkTable, family: _Family, group: int, first: int) -> tuple[str, str, str | None, str | None]:
    """(kind, host, device, peer) of component `group` of `family`, one of whose links is at `first`."""
    if family.kind == "end":  # a group is an end, a NIC or a host: its own number
        host, device = links.ends[group].rsplit(":", 1)
        return ("gpu" if device.startswith("gpu") else "rank"), host, device, None
    if family.kind == "nic":
        host, _, device = links.nics[group].rpartition("/")  # a NIC's name has no "/", a host's from a file may
        return "nic", host, device, None
    if family.kind == "host":
        return "host", links.hosts[group], None, None
    if family.kind == "link":
        host, device = links.ends[links.src_end[first]].rsplit(":", 1)
        return "link", host, device, links.ends[links.dst_end[first]]
    src, dst = links.hosts[links.src_host[first]], links.hosts[links.dst_host[first]]
    if family.direction == "both":
        src, dst = sorted((src, dst))
    return "pair", src, None, dst


def _possible(links: LinkTable, family: _Family) -> tuple[Positions, Ints | Positions]:
    """The positions and groups of `family`'s components whose level can be below ln(1 - min_drop):
    at least half of their links are. A healthy run drops nearly all of them here, before any sort."""
    below = links.x[family.positions] < links.params.most
    sizes = np.bincount(family.groups, minlength=family.count)
    possible = 2 * np.bincount(family.groups, weights=below, minlength=family.count) >= np.maximum(sizes, 1)
    keep = possible[family.groups]
    return family.positions[keep], family.groups[keep]


def _candidates(links: LinkTable, family: _Family, weight: Floats, z_crit: float, params: Params) -> list[_Candidate]:
    """The components of `family` that pass the three tests (see the module's text)."""
    if not family.count or not len(family.positions):
        return []
    positions, groups = _possible(links, family)
    x = links.x[positions]
    level = grouped_median(groups, x, family.count)
    median_z = grouped_median(groups, links.z[positions], family.count)
    sizes = np.bincount(groups, minlength=family.count)
    with np.errstate(invalid="ignore", divide="ignore"):
        slow = x < level[groups] / 2
        w = weight[positions]
        fraction = np.bincount(groups, weights=w * slow, minlength=family.count) / np.bincount(
            groups, weights=w, minlength=family.count
        )
        z = np.where(sizes > 1, median_z * np.sqrt(sizes) / MEDIAN_ERROR, median_z)
        passing = (level < links.params.most) & (fraction >= params.majority) & (z < -z_crit)
    chosen = np.flatnonzero(passing)
    if not len(chosen):
        return []
    order = np.argsort(groups, kind="stable")
    starts = np.concatenate(([0], np.cumsum(sizes)))
    found = []
    for group in chosen.tolist():
        inside = order[starts[group] : starts[group + 1]]
        members = positions[inside]
        if _recovered(links, members[slow[inside]]):
            continue
        key = _key(links, family, group, int(members[0]))
        found.append(
            _Candidate(family, members, slow[inside], float(level[group]), float(z[group]), float(fraction[group]), key)
        )
    return found


def _recovered(links: LinkTable, slow: Positions) -> bool:
    """Whether these slow links, re-measured alone after the screen (at least half of them), ran
    there at least as fast as their class's median (theirs): the part was slow only under the
    screen's load (a stall of the machine, a neighbour's burst), not broken. Not merely near it: a
    link alone often runs faster than its loaded class, and a part at 90% then reaches 95% alone."""
    alone = links.alone[slow]
    again = alone[~np.isnan(alone)]
    return bool(again.size) and 2 * again.size >= alone.size and float(np.median(again)) >= 0.0


def _cover(candidates: list[_Candidate], weight: Floats, size: int, params: Params) -> list[_Candidate]:
    """Greedy set cover (lazy: a gain only falls as links are explained): the candidate of most
    gain next, ties to fewer links, then the smaller kind."""
    explained = np.zeros(size, bool)
    heap = [
        (-c.gain(weight, explained, params.fine_penalty), len(c.members), KINDS.index(c.key[0]), n)
        for n, c in enumerate(candidates)
    ]
    heapq.heapify(heap)
    chosen: list[_Candidate] = []
    while heap and len(chosen) < params.max_suspects:
        _gain, members, order, n = heapq.heappop(heap)
        candidate = candidates[n]
        entry = (-candidate.gain(weight, explained, params.fine_penalty), members, order, n)
        if heap and entry > heap[0]:
            heapq.heappush(heap, entry)  # another explains more now
            continue
        if -entry[0] < params.min_gain:
            break
        chosen.append(candidate)
        explained[candidate.members] = True  # its links are accounted for, the ones within noise too
    return chosen


def _critical(families: list[_Family], alpha: float) -> tuple[float, float]:
    """The normal quantile a component's z must pass, and its tail: alpha over every component tested."""
    tested = sum(len(np.unique(f.groups)) for f in families if len(f.groups))
    tail = alpha / max(tested, 1)
    return statistics.NormalDist().inv_cdf(1 - tail), tail


def _few_links(links: LinkTable, z_crit: float, tail: float) -> None:
    """Scale each link's z (in the table) by its class's normal over Student-t quantile: a spread
    estimated from few links is uncertain, and its links must stand further out to pass the same test."""
    factor = np.array([z_crit / student_quantile(tail, float(d)) for d in links.dof.tolist()])
    links.z = links.z * factor[links.klass]


def attribute(rows: list[Row], params: Params | None = None) -> Attribution:
    """The suspects of `rows` (rows.aggregate's rows of one run or several), in the order the
    cover chose them: the one that explains most first."""
    params = params or Params()
    links = table(rows, params.floors)
    weight = _weights(links, params)
    families = _families(links)
    z_crit, tail = _critical(families, params.alpha)
    _few_links(links, z_crit, tail)
    candidates = [c for family in families for c in _candidates(links, family, weight, z_crit, params)]
    chosen = [c for c in _cover(candidates, weight, len(links), params) if _confirmed(links, c)]
    context = _Context(links, weight, params)
    suspects = [context.suspect(c, candidates) for c in chosen]
    covered = np.zeros(len(links), bool)
    for candidate in chosen:
        covered[candidate.members] = True
    left = np.flatnonzero(links.slow & ~covered)
    again = left[np.argsort(links.x[left], kind="stable")]
    once, again = again[np.isnan(links.alone[again])], again[~np.isnan(links.alone[again])]
    return Attribution(
        suspects,
        links.classes,
        int(links.judged.sum()),
        int(links.slow.sum()),
        len(again),
        [links.rows[i].link for i in again[: params.listed].tolist()],
        params,
        links,
        [links.rows[i] for i in once.tolist()],
        [_ratio(links, i) for i in once.tolist()],
    )


def _confirmed(links: LinkTable, candidate: _Candidate) -> bool:
    """Whether a part's evidence is more than one figure: two slow links or more, or a slow link
    that a screen re-measured alone and stayed slow. One slow figure, never measured again, is a
    reason to measure it again (Attribution.remeasure), not a broken part: a healthy fleet has a
    few transient ones, and each passed the test a single link must pass."""
    slow = candidate.members[candidate.slow]
    if len(slow) >= 2:
        return True
    alone = links.alone[slow]
    return bool(np.any(alone < links.params.most))


def _ratio(links: LinkTable, position: int) -> float:
    """A link's figure over its class median (a time too: below 1 is worse)."""
    return math.exp(float(links.x[position]))


class _Context:
    """What a suspect's evidence is weighed against: its links' classes (their usual limit,
    transport and warnings), counted once per class."""

    def __init__(self, links: LinkTable, weight: Floats, params: Params):
        self.links, self.weight, self.params = links, weight, params
        self._usual: dict[int, tuple[Counter[Any], Counter[Any], Counter[str], int]] = {}

    def usual(self, klass: int) -> tuple[Counter[Any], Counter[Any], Counter[str], int]:
        """Of the links of class `klass`: their limits, transports and warnings, and how many."""
        found = self._usual.get(klass)
        if found is None:
            rows = [self.links.rows[i] for i in np.flatnonzero(self.links.klass == klass).tolist()]
            warned: Counter[str] = Counter(w for row in rows for w in row.warnings)
            found = Counter(r.limit for r in rows), Counter(_carriers(r) for r in rows), warned, len(rows)
            self._usual[klass] = found
        return found

    def suspect(self, candidate: _Candidate, candidates: list[_Candidate]) -> Suspect:
        links, listed = self.links, self.params.listed
        members, slow = candidate.members, candidate.slow
        bad, fine = members[slow], members[~slow]
        bad = bad[np.argsort(links.x[bad], kind="stable")]
        w = self.weight[bad]
        weighted = float(w.sum())
        spread = MAD_TO_SIGMA * float(np.median(np.abs(links.x[bad] - np.median(links.x[bad]))))
        consistency = 1.0 / (1.0 + (spread / abs(candidate.level)) ** 2) if candidate.level else 0.0
        confidence = candidate.fraction * weighted / (weighted + 1.0) * consistency
        kind, host, device, peer = candidate.key
        suspect = Suspect(
            kind, host, device, candidate.family.direction, peer, len(members), len(bad),
            [links.rows[i].link for i in bad[:listed].tolist()], len(fine),
            [links.rows[i].link for i in fine[:listed].tolist()], math.exp(float(np.median(links.x[bad]))),
            math.exp(candidate.level), round(confidence, 3),
        )  # fmt: skip
        suspect.rows = [links.rows[i] for i in bad.tolist()]
        _evidence(self, suspect, bad, fine)
        suspect.alternatives = _alternatives(candidate, candidates, bad, len(links))[:listed]
        return suspect


def _name(candidate: _Candidate) -> str:
    kind, host, device, peer = candidate.key
    probe = Suspect(kind, host, device, candidate.family.direction, peer, 0, 0, [], 0, [], 1.0, 1.0, 0.0)
    return probe.name


CLOSE = 0.9  # another component whose slow links are this much the same as a suspect's is named beside it


def _alternatives(candidate: _Candidate, candidates: list[_Candidate], bad: Positions, size: int) -> list[str]:
    """The other candidates whose slow links are (nearly) the suspect's: where a GPU sends through
    a NIC of its own, only its links within the node tell the two apart, and a run may not."""
    mine = np.zeros(size, bool)
    mine[bad] = True
    found = []
    for other in candidates:
        if other is candidate:
            continue
        theirs = other.members[other.slow]
        shared = int(mine[theirs].sum())
        if shared >= CLOSE * max(len(theirs), len(bad)):
            found.append(f"{_name(other)} ({shared} of its {len(theirs)} slow link(s) are the same)")
    return found


def _evidence(context: _Context, suspect: Suspect, bad: Positions, fine: Positions) -> None:
    """The re-measures, wire counters, limits, warnings and transports of a suspect's slow links,
    for it or against it; and the NICs or GPUs it used."""
    links = context.links
    rows = [links.rows[i] for i in bad.tolist()]
    _remeasured(context, suspect, bad)
    _wire(suspect, rows)
    _against_class(context, suspect, bad, rows)
    if fine.size:
        names = ", ".join(suspect.fine_links[:3])
        suspect.contradicting.append(f"{len(fine)} of its {suspect.links} link(s) ran within their class: {names}")
    _placement(links, suspect, bad)


def _remeasured(context: _Context, suspect: Suspect, bad: Positions) -> None:
    alone = context.links.alone[bad]
    again = alone[~np.isnan(alone)]
    if not again.size:
        return
    most = context.links.params.most
    stayed, recovered = again[again < most], again[again >= most]
    if stayed.size:
        suspect.supporting.append(
            f"{stayed.size} of its slow link(s) re-measured alone stayed slow "
            f"(median {math.exp(float(np.median(stayed))):.0%} of their class)"
        )
    if recovered.size:
        suspect.contradicting.append(
            f"{recovered.size} of its slow link(s) ran at {math.exp(float(np.median(recovered))):.0%} of their class "
            "re-measured alone: slow only under load"
        )


def _wire(suspect: Suspect, rows: list[Row]) -> None:
    """What the byte counters of its slow links say: the bytes crossed the device the transport
    claims (the part carried them, slowly), or they went another way."""
    read = [row for row in rows if row.wire_ratio is not None]
    if not read:
        return
    low = [row for row in read if row.wire_ratio is not None and row.wire_ratio < WIRE_LOW]
    devices = ", ".join(sorted({str(row.wire_dev) for row in read})[:3])
    if low:
        lowest = min(row.wire_ratio for row in low if row.wire_ratio is not None)
        text = (
            f"wire: {len(low)} of {len(read)} slow link(s) counted under {WIRE_LOW:.0%} of their bytes on {devices} "
            f"(lowest {lowest:.0%}): the bytes went another way"
        )
        (suspect.supporting if suspect.kind in ("pair", "link") else suspect.contradicting).append(text)
    else:
        suspect.supporting.append(f"wire: the bytes of {len(read)} slow link(s) were counted on {devices}, as claimed")


def _against_class(context: _Context, suspect: Suspect, bad: Positions, rows: list[Row]) -> None:
    """The limits, transports and warnings its slow links have that their classes' links do not."""
    klass = int(Counter(context.links.klass[bad].tolist()).most_common(1)[0][0])
    limits, transports, warnings, count = context.usual(klass)
    usual_limit = limits.most_common(1)[0][0]
    mine = Counter(row.limit for row in rows).most_common(1)[0][0]
    if mine != usual_limit:
        suspect.supporting.append(
            f"placement: its slow links' limit is {mine or 'unknown'} where their class's is {usual_limit or 'unknown'}"
        )
    shares = [row.share for row in rows if row.share is not None]
    if shares and mine is not None:
        floor = context.links.classes[klass]
        usual = f" where its class runs at {floor.median_share:.0%}" if floor.median_share is not None else ""
        suspect.supporting.append(f"its slow links ran at {statistics.median(shares):.0%} of their {mine}{usual}")
    _odd_transport(suspect, transports, rows)
    mine_warned: Counter[str] = Counter(w for row in rows for w in row.warnings)
    for warning, n in mine_warned.most_common(2):
        if n * 2 >= len(rows) and warnings[warning] - n < 0.1 * max(count - len(rows), 1):
            suspect.supporting.append(f"its slow links warn, unlike their class: {warning}")


_CARRIERS: dict[frozenset[str], frozenset[str]] = {}


def _carriers(row: Row) -> frozenset[str]:
    """The transports of a row without their devices ("rc_mlx5", "tcp"): a class spans many devices."""
    found = _CARRIERS.get(row.transports)
    if found is None:
        names = (part.partition("/")[0] for text in row.transports for part in text.split(","))
        found = _CARRIERS[row.transports] = frozenset(names)
    return found


def _odd_transport(suspect: Suspect, transports: Counter[Any], rows: list[Row]) -> None:
    """Where most of its slow links went over another transport than their class's (tcp for rc_mlx5)."""
    usual = transports.most_common(1)[0][0]
    odd = Counter(found for found in map(_carriers, rows) if found != usual)
    if odd and sum(odd.values()) * 2 >= len(rows):
        shown = ", ".join(sorted(odd.most_common(1)[0][0])) or "none"
        suspect.supporting.append(
            f"transport: its slow links went over {shown} where their class used {', '.join(sorted(usual)) or 'none'}"
        )


def _placement(links: LinkTable, suspect: Suspect, bad: Positions) -> None:
    """The NICs a GPU's (or rank's) slow links used; the GPUs a NIC's slow links came from."""
    sends = suspect.direction != "receive"
    if suspect.kind in ("gpu", "rank"):
        column = links.src_nic if sends else links.dst_nic
        nics = sorted({links.nics[i] for i in column[bad].tolist() if i >= 0})
        suspect.placement = [f"through {', '.join(nics[:4])}"] if nics else []
    elif suspect.kind == "nic":
        column = links.src_end if sends else links.dst_end
        ends = sorted({links.ends[i] for i in column[bad].tolist()})
        suspect.placement = [f"carrying {', '.join(ends[:8])}"]
