#!/usr/bin/python3
"""The monitoring assets l7fast ships (packaging/monitoring/: the Grafana
dashboard and the Prometheus alert rules, installed under
/usr/share/l7fast/monitoring/) against Grafana's and Prometheus' rules and
against the metrics l7fastd really exports:

- promtool check rules on the alert rules, promtool test rules on
  tests/monitoring/alerts_test.yml, and every alert has a case there that
  fires it and one that does not;
- the dashboard against tests/monitoring/dashboard.schema.json (JSON Schema
  2020-12), panel ids unique, gridPos rectangles disjoint and inside the 24
  columns, refIds unique per panel, the datasource and instance variables;
- every PromQL expression of both (targets, annotations, variables, the
  alerts' template queries): each l7fast_* and process_* series it selects is
  one that daemon/src/control/Metrics.cpp writes (a histogram's _bucket,
  _count, and _sum only where it writes one), each label it matches,
  groups by or prints ({{route}}, {{ $labels.endpoint }}) is one that series
  has (or the target labels instance and job), a matched value is one the
  code can write where the code names them all (plane="kernel",
  class="5xx"), counters appear only under rate/increase/irate and gauges
  never, histogram_quantile groups by le, and every dashboard query is
  limited to the selected instances;
- every family the code exports is on the dashboard.

The exported families are read from Metrics.cpp as it writes them
(e.family("name", "type", ...), e.sample("name", {{"label", value}, ...}),
e.histogram[_bounds]("name", "label", ...)); the reader counts those calls
and fails when one does not parse, so a new style of writing a family
cannot slip past it. `--exposition FILE` checks the references against a
live scrape instead (the e2e test does that with the module's functions).

Exit status 0 when all holds; 1 with one line per failure otherwise. A
missing promtool, jsonschema or yaml is a failure: run scripts/install-deps.sh.

  /usr/bin/python3 tests/monitoring/check.py [--exposition FILE]
"""
import argparse
import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
TOP = HERE.parents[1]
METRICS_CPP = TOP / "daemon/src/control/Metrics.cpp"
CONTROL_API = TOP / "daemon/src/control/ControlApi.hpp"
DASHBOARD = TOP / "packaging/monitoring/l7fast-dashboard.json"
ALERTS = TOP / "packaging/monitoring/l7fast-alerts.yml"
SCHEMA = HERE / "dashboard.schema.json"
ALERT_TESTS = HERE / "alerts_test.yml"

DEPS_HINT = "run scripts/install-deps.sh"
# Labels Prometheus adds to every series of a target.
TARGET_LABELS = {"instance", "job"}
# Series the rules may select that are not l7fastd's: Prometheus' own
# per-target series, for the target-down alert.
FOREIGN_SERIES = {"up": set()}
# The dashboard's variables that queries use.
INSTANCE_MATCHER = ("instance", "=~", "$instance")
# Families on the dashboard by name, or here with the reason they are not.
NOT_ON_DASHBOARD = {}
OURS = re.compile(r"\b(?:l7fast|process)_[a-zA-Z0-9_]+")


class Failure(Exception):
    pass


# ---------------------------------------------------------------- families

@dataclass
class Family:
    name: str
    type: str
    # series name -> its label names (without the target labels)
    series: dict = field(default_factory=dict)
    # label name -> the values the code can write, or None when any
    values: dict = field(default_factory=dict)

    def add_values(self, label, vals):
        if label in self.values and self.values[label] is None:
            return
        self.values[label] = None if vals is None else self.values.get(label, set()) | vals


def _balanced(text, start, open_ch="{", close_ch="}"):
    """Index just past the bracket group opening at text[start]."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_ch:
            depth += 1
        elif text[i] == close_ch:
            depth -= 1
            if depth == 0:
                return i + 1
    raise Failure(f"unbalanced {open_ch}{close_ch} at offset {start}")


def status_classes(control_api_text):
    m = re.search(r"kStatusClass\[[^\]]*\]\s*=\s*\{([^}]*)\}", control_api_text)
    if not m:
        raise Failure(f"{CONTROL_API.relative_to(TOP)}: kStatusClass not found (check.py reads the status "
                      "classes from it)")
    return set(re.findall(r'"([^"]*)"', m.group(1)))


def _label_values(expr, classes):
    """The values a label's C++ value expression can take, or None."""
    expr = " ".join(expr.split())
    if m := re.fullmatch(r'"([^"\\]*)"', expr):
        return {m.group(1)}
    if m := re.fullmatch(r'.*\?\s*"([^"\\]*)"\s*:\s*"([^"\\]*)"', expr):
        return {m.group(1), m.group(2)}
    if expr.startswith("kStatusClass["):
        return set(classes)
    return None


def families_from_source(text, classes):
    """{name: Family} as Metrics.cpp writes them."""
    fams = {}
    declared = re.findall(r'\be\.family\(\s*"([a-zA-Z_:][a-zA-Z0-9_:]*)"\s*,\s*"(counter|gauge|histogram)"', text)
    n_calls = len(re.findall(r"\be\.family\(", text))
    if len(declared) != n_calls:
        raise Failure(f"{METRICS_CPP.relative_to(TOP)}: {n_calls} e.family( calls, {len(declared)} of them read "
                      "as e.family(\"name\", \"counter|gauge|histogram\", ...): update families_from_source()")
    for name, kind in declared:
        if name in fams:
            raise Failure(f"{METRICS_CPP.relative_to(TOP)}: family {name} declared twice")
        fams[name] = Family(name, kind)

    def family_of(name, where):
        if name not in fams:
            raise Failure(f"{METRICS_CPP.relative_to(TOP)}: {where} writes {name}, which no e.family() declares")
        return fams[name]

    n_samples = 0
    for m in re.finditer(r"\be\.(sample|sample_seconds|sample_text)\(", text):
        n_samples += 1
        call = m.group(0)
        rest = text[m.end():]
        nm = re.match(r'\s*"([a-zA-Z_:][a-zA-Z0-9_:]*)"\s*,\s*', rest)
        if not nm:
            raise Failure(f"{METRICS_CPP.relative_to(TOP)}: a {call} call whose name is not a string literal: "
                          f"{rest[:60]!r}")
        fam = family_of(nm.group(1), call)
        if fam.type == "histogram":
            raise Failure(f"{METRICS_CPP.relative_to(TOP)}: {call}\"{fam.name}\" writes a histogram family "
                          "sample by sample: update families_from_source()")
        labels = set()
        if m.group(1) != "sample_seconds":
            after = m.end() + nm.end()
            if text[after] != "{":
                raise Failure(f"{METRICS_CPP.relative_to(TOP)}: {call}\"{fam.name}\" without a label list")
            body = text[after + 1:_balanced(text, after) - 1]
            pairs = re.findall(r'\{\s*"([a-zA-Z_][a-zA-Z0-9_]*)"\s*,\s*((?:[^{}]|\{[^{}]*\})*?)\s*\}', body)
            if len(pairs) != body.count('{"'):
                raise Failure(f"{METRICS_CPP.relative_to(TOP)}: cannot read the labels of {fam.name}: {body!r}")
            for label, value in pairs:
                labels.add(label)
                fam.add_values(label, _label_values(value, classes))
        if fam.name in fam.series and fam.series[fam.name] != labels:
            raise Failure(f"{METRICS_CPP.relative_to(TOP)}: {fam.name} written with labels "
                          f"{sorted(fam.series[fam.name])} and {sorted(labels)}")
        fam.series[fam.name] = labels
    if n_samples == 0:
        raise Failure(f"{METRICS_CPP.relative_to(TOP)}: no e.sample( call found")

    hist_calls = re.findall(r"\be\.histogram(?:_bounds)?\(", text)
    hists = re.findall(r'\be\.histogram(_bounds)?\(\s*"([a-zA-Z_:][a-zA-Z0-9_:]*)"\s*,\s*"([a-zA-Z_][a-zA-Z0-9_]*)"',
                       text)
    if len(hists) != len(hist_calls):
        raise Failure(f"{METRICS_CPP.relative_to(TOP)}: {len(hist_calls)} e.histogram calls, {len(hists)} read as "
                      "e.histogram[_bounds](\"name\", \"label\", ...): update families_from_source()")
    for bounds, name, label in hists:
        fam = family_of(name, "e.histogram")
        if fam.type != "histogram":
            raise Failure(f"{METRICS_CPP.relative_to(TOP)}: {name} is declared {fam.type} but written as a histogram")
        # Exposition::histogram writes _bucket and _count; histogram_bounds
        # also _sum (the data plane counts buckets only)
        fam.series[name + "_bucket"] = {label, "le"}
        fam.series[name + "_count"] = {label}
        if bounds:
            fam.series[name + "_sum"] = {label}
        fam.add_values(label, None)
    for fam in fams.values():
        if not fam.series:
            raise Failure(f"{METRICS_CPP.relative_to(TOP)}: family {fam.name} is declared but never written")
    return fams


def load_source_families():
    return families_from_source(METRICS_CPP.read_text(), status_classes(CONTROL_API.read_text()))


PROM_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+\S+(?:\s+\S+)?$")
PROM_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"')


def families_from_exposition(text):
    """{name: Family} of a scrape (text format 0.0.4), or of several
    concatenated; label values unknown."""
    fams = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            if fams.setdefault(name, Family(name, kind)).type != kind:
                raise Failure(f"exposition: {name} is both {fams[name].type} and {kind}")
            continue
        if not line or line.startswith("#"):
            continue
        m = PROM_SAMPLE.match(line)
        if not m:
            raise Failure(f"exposition: cannot read {line!r}")
        name = m.group(1)
        base = re.sub(r"_(bucket|count|sum)$", "", name)
        fam = fams.get(name) or (fams.get(base) if fams.get(base) and fams[base].type == "histogram" else None)
        if fam is None:
            raise Failure(f"exposition: {name} has no TYPE line before it")
        labels = set(PROM_LABEL.findall(m.group(2) or ""))
        fam.series.setdefault(name, set()).update(labels)
        for label in labels:
            fam.values[label] = None
    return fams


def series_index(fams):
    """{series name: (Family, label names)}"""
    return {s: (f, labels) for f in fams.values() for s, labels in f.series.items()}


# ------------------------------------------------------------------ PromQL

TOKEN = re.compile(r"""
  (?P<ws>\s+|\#[^\n]*)
| (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
| (?P<var>\$\{[^}]*\}|\$[a-zA-Z_][a-zA-Z0-9_]*)
| (?P<num>(?:0[xX][0-9a-fA-F]+|(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)(?:ms|[smhdwy])?(?:\d+(?:ms|[smhdwy]))*)
| (?P<ident>[a-zA-Z_:][a-zA-Z0-9_:]*)
| (?P<op>=~|!~|!=|==|<=|>=|[-+*/%^=<>(){}\[\],@:])
""", re.X)
AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk",
                "topk", "quantile", "limitk", "limit_ratio"}
GROUPING = {"by", "without"}
MATCHING = {"on", "ignoring", "group_left", "group_right"}
KEYWORDS = {"bool", "offset", "and", "or", "unless", "atan2", "inf", "nan", "start", "end"}
RATE_FUNCS = {"rate", "increase", "irate"}
# functions that create labels this checker does not follow
UNFOLLOWED = {"label_replace", "label_join"}


@dataclass
class Selector:
    name: str
    matchers: list          # [(label, op, value)]
    pos: int                # token index of the name
    ranged: bool = False    # followed by [range]
    func: str = None        # the function whose argument it is directly


@dataclass
class Grouping:
    keyword: str
    labels: list
    scope: tuple            # token index range of the body, or None: the whole expression
    top: bool = False       # an aggregation not inside another aggregation's body


@dataclass
class Analysis:
    expr: str
    selectors: list = field(default_factory=list)
    groupings: list = field(default_factory=list)
    quantiles: list = field(default_factory=list)   # (open, close) of each histogram_quantile( ... )


def _unquote(s):
    if s[0] == "`":
        return s[1:-1]
    return re.sub(r"\\(.)", r"\1", s[1:-1])


def tokenize(expr):
    toks, i = [], 0
    while i < len(expr):
        m = TOKEN.match(expr, i)
        if not m:
            raise Failure(f"cannot read the PromQL at {expr[i:i + 30]!r}")
        i = m.end()
        if m.lastgroup != "ws":
            toks.append((m.lastgroup, m.group()))
    return toks


def analyse(expr):
    """What one PromQL expression selects and groups by (not a full parser:
    the shapes the shipped assets use, and a failure on anything else it
    would misread)."""
    toks = tokenize(expr)
    a = Analysis(expr)
    match = {}
    stack = []
    for i, (kind, text) in enumerate(toks):
        if text in "([{" and kind == "op":
            stack.append((i, text))
        elif text in ")]}" and kind == "op":
            if not stack or stack[-1][1] != {")": "(", "]": "[", "}": "{"}[text]:
                raise Failure(f"unbalanced {text!r} in {expr!r}")
            match[stack.pop()[0]] = i
    if stack:
        raise Failure(f"unclosed {stack[-1][1]!r} in {expr!r}")

    def ident(i):
        return toks[i][1] if i < len(toks) and toks[i][0] == "ident" else None

    def op(i):
        return toks[i][1] if i < len(toks) and toks[i][0] == "op" else None

    def label_list(i):
        """labels of the ( ... ) at i; returns (labels, index after)"""
        if op(i) != "(":
            raise Failure(f"expected a label list after {toks[i - 1][1]!r} in {expr!r}")
        end = match[i]
        labels = [t for k, t in toks[i + 1:end] if k == "ident"]
        if any(k not in ("ident",) and t != "," for k, t in toks[i + 1:end]):
            raise Failure(f"cannot read the label list {' '.join(t for _, t in toks[i:end + 1])!r} in {expr!r}")
        return labels, end + 1

    # the function each "(" belongs to
    opener = {}
    agg_bodies = []
    i = 0
    while i < len(toks):
        kind, text = toks[i]
        if kind == "ident" and text in AGGREGATIONS and (op(i + 1) == "(" or ident(i + 1) in GROUPING):
            if ident(i + 1) in GROUPING:
                labels, j = label_list(i + 2)
                if op(j) != "(":
                    raise Failure(f"expected the body of {text} in {expr!r}")
                a.groupings.append(Grouping(ident(i + 1), labels, (j, match[j])))
                agg_bodies.append((j, match[j], len(a.groupings) - 1))
                opener[j] = text
                i = j + 1
                continue
            j = i + 1
            opener[j] = text
            after = match[j] + 1
            if ident(after) in GROUPING:
                labels, _ = label_list(after + 1)
                a.groupings.append(Grouping(ident(after), labels, (j, match[j])))
                agg_bodies.append((j, match[j], len(a.groupings) - 1))
            else:
                a.groupings.append(Grouping("by", [], (j, match[j])))
                agg_bodies.append((j, match[j], len(a.groupings) - 1))
            i = j + 1
            continue
        if kind == "ident" and text in GROUPING:
            # the trailing "by (...)" of an aggregation, handled above
            _, i = label_list(i + 1)
            continue
        if kind == "ident" and text in MATCHING:
            if op(i + 1) == "(":
                labels, i = label_list(i + 1)
                a.groupings.append(Grouping(text, labels, None))
            else:
                i += 1
            continue
        if kind == "ident" and text.lower() in KEYWORDS:
            i += 1
            continue
        if kind == "ident" and op(i + 1) == "(":
            if text in UNFOLLOWED:
                raise Failure(f"{text}() in {expr!r}: check.py does not follow the labels it makes")
            opener[i + 1] = text
            if text == "histogram_quantile":
                a.quantiles.append((i + 1, match[i + 1]))
            i += 2
            continue
        if kind == "op" and text == "[":
            i = match[i] + 1
            continue
        if (kind == "ident") or (kind == "op" and text == "{"):
            name = text if kind == "ident" else None
            j = i + 1 if kind == "ident" else i
            matchers = []
            if op(j) == "{":
                end = match[j]
                k = j + 1
                while k < end:
                    if not (toks[k][0] == "ident" and op(k + 1) in ("=", "!=", "=~", "!~") and
                            toks[k + 2][0] == "str"):
                        raise Failure(f"cannot read the matchers {' '.join(t for _, t in toks[j:end + 1])!r} "
                                      f"in {expr!r}")
                    matchers.append((toks[k][1], toks[k + 1][1], _unquote(toks[k + 2][1])))
                    k += 3
                    if op(k) == ",":
                        k += 1
                j = end + 1
            if name is None:
                raise Failure(f"a selector without a metric name in {expr!r}")
            sel = Selector(name, matchers, i)
            if op(j) == "[":
                sel.ranged = True
                j = match[j] + 1
            # the function whose argument list directly holds the selector
            for o, f in opener.items():
                if o < i < match[o] and not any(o < p < i < match[p] for p in opener if p != o):
                    sel.func = f
            a.selectors.append(sel)
            i = j
            continue
        i += 1
    # aggregations not inside another aggregation's body
    for o, c, g in agg_bodies:
        a.groupings[g].top = not any(o2 < o and c < c2 for o2, c2, _ in agg_bodies)
    return a


def output_labels(a, index):
    """The labels an expression's result keeps (approximately: the top
    aggregations' by lists, or every selected series' labels)."""
    tops = [g for g in a.groupings if g.top]
    if tops and all(g.keyword == "by" for g in tops):
        labels = set().union(*(g.labels for g in tops))
    else:
        labels = set(TARGET_LABELS)
        for s in a.selectors:
            labels |= series_labels(s.name, index) or set()
    # histogram_quantile consumes le
    return labels - {"le"} if a.quantiles else labels


def series_labels(name, index):
    if name in FOREIGN_SERIES:
        return FOREIGN_SERIES[name] | TARGET_LABELS
    if name in index:
        return index[name][1] | TARGET_LABELS
    return None


def check_expr(expr, where, index, errors, dashboard=False):
    """Appends to errors what is wrong with one expression; returns its
    Analysis (or None when it could not be read)."""
    try:
        a = analyse(expr)
    except Failure as e:
        errors.append(f"{where}: {e}")
        return None
    for s in a.selectors:
        labels = series_labels(s.name, index)
        if labels is None:
            hint = ""
            base = re.sub(r"_(bucket|count|sum)$", "", s.name)
            if base in {f.name for f, _ in index.values()}:
                hint = f" (the family {base} is exported as {', '.join(sorted(index_series_of(base, index)))})"
            errors.append(f"{where}: {s.name} is not a series l7fastd exports{hint}")
            continue
        for label, mop, value in s.matchers:
            if label not in labels:
                errors.append(f"{where}: {s.name} has no label {label!r} (it has {', '.join(sorted(labels))})")
                continue
            if s.name in FOREIGN_SERIES or "$" in value or mop in ("!=", "!~"):
                continue
            known = index[s.name][0].values.get(label)
            if known is None:
                continue
            if mop == "=" and value not in known:
                errors.append(f"{where}: {s.name}{{{label}=\"{value}\"}} selects nothing: l7fastd writes "
                              f"{label} as {', '.join(sorted(known))}")
            if mop == "=~" and not any(re.fullmatch(value, v) for v in known):
                errors.append(f"{where}: {s.name}{{{label}=~\"{value}\"}} selects nothing: l7fastd writes "
                              f"{label} as {', '.join(sorted(known))}")
        if dashboard and s.name not in FOREIGN_SERIES and INSTANCE_MATCHER not in s.matchers:
            errors.append(f"{where}: {s.name} without the matcher instance=~\"$instance\" (the dashboard's "
                          "instance variable)")
        if s.name in FOREIGN_SERIES:
            continue
        fam = index[s.name][0]
        counter = fam.type == "counter" or fam.type == "histogram"
        if counter and not (s.ranged and s.func in RATE_FUNCS):
            errors.append(f"{where}: {s.name} is a counter: use it as rate/increase/irate({s.name}[...])")
        if not counter and s.func in RATE_FUNCS:
            errors.append(f"{where}: {s.name} is a gauge: {s.func}() of it means nothing (deriv/delta/changes)")
    for g in a.groupings:
        if g.scope is None:
            scope = a.selectors
        else:
            scope = [s for s in a.selectors if g.scope[0] < s.pos < g.scope[1]]
        known = set(TARGET_LABELS)
        for s in scope:
            known |= series_labels(s.name, index) or set()
        for label in g.labels:
            if label not in known:
                errors.append(f"{where}: {g.keyword} ({', '.join(g.labels)}): no series it applies to has the "
                              f"label {label!r}")
    for o, c in a.quantiles:
        inner = [g for g in a.groupings if g.scope and o < g.scope[0] and g.scope[1] < c]
        buckets = [s for s in a.selectors if o < s.pos < c]
        if not buckets or not all(s.name.endswith("_bucket") for s in buckets):
            errors.append(f"{where}: histogram_quantile over something else than _bucket series")
        if not inner or not all((g.keyword == "by") == ("le" in g.labels) for g in inner):
            errors.append(f"{where}: histogram_quantile needs its buckets aggregated with by (..., le)")
    return a


def index_series_of(family, index):
    return [s for s, (f, _) in index.items() if f.name == family]


def check_text_names(text, where, index, fams, errors):
    """Metric names in prose and templates must exist too."""
    for name in set(OURS.findall(text)):
        if name not in index and name not in fams:
            errors.append(f"{where}: mentions {name}, which l7fastd does not export")


def check_legend(legend, a, where, index, errors):
    if a is None:
        return
    have = output_labels(a, index)
    for label in re.findall(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}", legend):
        if label not in have:
            errors.append(f"{where}: legend {{{{{label}}}}}: the query's result has no label {label!r} "
                          f"(it has {', '.join(sorted(have)) or 'none'})")


# --------------------------------------------------------------- dashboard

def all_panels(dash):
    for p in dash.get("panels", []):
        yield p
        yield from p.get("panels", [])


def dashboard_queries(dash):
    """(where, expr, legend) of every PromQL expression in the dashboard."""
    out = []
    for p in all_panels(dash):
        for t in p.get("targets", []):
            out.append((f"panel {p.get('id')} \"{p.get('title')}\" target {t.get('refId')}", t.get("expr", ""),
                        t.get("legendFormat", "")))
    for ann in dash.get("annotations", {}).get("list", []):
        if "expr" in ann:
            out.append((f"annotation \"{ann.get('name')}\"", ann["expr"], ann.get("textFormat", "")))
    return out


def check_dashboard(dash, index, fams, errors):
    import jsonschema  # checked in main()
    where = DASHBOARD.relative_to(TOP)
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    for e in sorted(jsonschema.Draft202012Validator(schema).iter_errors(dash), key=lambda e: list(e.absolute_path)):
        path = "/".join(str(p) for p in e.absolute_path) or "(top)"
        errors.append(f"{where}: schema: at {path}: {e.message}")
    panels = list(all_panels(dash))
    ids = {}
    for p in panels:
        if "id" in p:
            if p["id"] in ids:
                errors.append(f"{where}: panel id {p['id']} used by \"{ids[p['id']]}\" and \"{p.get('title')}\"")
            ids[p["id"]] = p.get("title")
        refs = [t.get("refId") for t in p.get("targets", [])]
        if len(refs) != len(set(refs)):
            errors.append(f"{where}: panel {p.get('id')} \"{p.get('title')}\": refIds not unique: {refs}")
    boxes = [(p, p["gridPos"]) for p in dash.get("panels", []) if isinstance(p.get("gridPos"), dict)]
    for p, g in boxes:
        if g.get("x", 0) + g.get("w", 0) > 24:
            errors.append(f"{where}: panel {p.get('id')} \"{p.get('title')}\": x {g['x']} + w {g['w']} exceeds "
                          "the 24 columns")
    for i, (p, g) in enumerate(boxes):
        for q, h in boxes[i + 1:]:
            try:
                if g["x"] < h["x"] + h["w"] and h["x"] < g["x"] + g["w"] and \
                        g["y"] < h["y"] + h["h"] and h["y"] < g["y"] + g["h"]:
                    errors.append(f"{where}: panels {p.get('id')} \"{p.get('title')}\" {g} and {q.get('id')} "
                                  f"\"{q.get('title')}\" {h} overlap")
            except (KeyError, TypeError):
                pass  # the schema reported it
    variables = {v.get("name"): v for v in dash.get("templating", {}).get("list", [])}
    ds = variables.get("datasource")
    if not ds or ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        errors.append(f"{where}: templating: no variable datasource of type datasource for prometheus")
    inst = variables.get("instance")
    if not inst or inst.get("type") != "query":
        errors.append(f"{where}: templating: no query variable instance")
    else:
        m = re.fullmatch(r"label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)", inst.get("query", ""))
        if not m or m.group(2) != "instance":
            errors.append(f"{where}: templating: instance is not label_values(<l7fast series>, instance)")
        else:
            a = check_expr(m.group(1), f"{where}: variable instance", index, errors)
            if a and (len(a.selectors) != 1 or not a.selectors[0].name.startswith("l7fast_")):
                errors.append(f"{where}: variable instance: label_values of an l7fast_* series")
    for v in variables.values():
        if v.get("type") == "query" and v.get("definition") != v.get("query"):
            errors.append(f"{where}: variable {v.get('name')}: definition differs from query")
    used = set()
    for w, expr, legend in dashboard_queries(dash):
        a = check_expr(expr, f"{where}: {w}", index, errors, dashboard=True)
        check_legend(legend, a, f"{where}: {w}", index, errors)
        if a:
            used |= {index[s.name][0].name for s in a.selectors if s.name in index}
    for p in panels:
        check_text_names(p.get("description", "") + " " + p.get("title", ""), f"{where}: panel {p.get('id')}",
                         index, fams, errors)
    check_text_names(dash.get("description", ""), f"{where}: description", index, fams, errors)
    for name in sorted(set(fams) - used - set(NOT_ON_DASHBOARD)):
        errors.append(f"{where}: {name} is exported but on no panel (add one, or list it in NOT_ON_DASHBOARD "
                      "of check.py with the reason)")
    return used


# ------------------------------------------------------------------ alerts

TEMPLATE_QUERY = re.compile(r"`([^`]*)`")
DURATION = re.compile(r"^(\d+(ms|[smhdwy]))+$")


def rule_queries(rules_doc):
    """(where, rule) of every rule of the rules file."""
    out = []
    for g in rules_doc.get("groups") or []:
        for r in g.get("rules") or []:
            out.append((f"group {g.get('name')} alert {r.get('alert') or r.get('record')}", r))
    return out


def check_rules(rules_doc, tests_doc, index, fams, errors):
    where = ALERTS.relative_to(TOP)
    groups = rules_doc.get("groups") or []
    if [g.get("name") for g in groups] != ["l7fast"]:
        errors.append(f"{where}: one rule group, l7fast, expected; found {[g.get('name') for g in groups]}")
    names = []
    used = set()
    for w, r in rule_queries(rules_doc):
        w = f"{where}: {w}"
        if "alert" not in r:
            errors.append(f"{w}: not an alerting rule")
            continue
        names.append(r["alert"])
        if not re.fullmatch(r"L7fast[A-Z][A-Za-z0-9]*", r["alert"]):
            errors.append(f"{w}: alert names are L7fast<Something>")
        if not DURATION.match(str(r.get("for", ""))):
            errors.append(f"{w}: no for: duration")
        if (r.get("labels") or {}).get("severity") not in ("critical", "warning", "info"):
            errors.append(f"{w}: labels.severity must be critical, warning or info")
        ann = r.get("annotations") or {}
        for key in ("summary", "description"):
            if not str(ann.get(key, "")).strip():
                errors.append(f"{w}: no annotations.{key}")
        a = check_expr(str(r.get("expr", "")), w, index, errors)
        if a:
            used |= {index[s.name][0].name for s in a.selectors if s.name in index}
            have = output_labels(a, index)
            for key, text in ann.items():
                for label in re.findall(r"\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)", str(text)):
                    if label not in have:
                        errors.append(f"{w}: annotations.{key} uses $labels.{label}, which the expression's "
                                      f"result does not have ({', '.join(sorted(have))})")
        for key, text in ann.items():
            check_text_names(str(text), f"{w}: annotations.{key}", index, fams, errors)
            for q in TEMPLATE_QUERY.findall(str(text)):
                if OURS.search(q):
                    check_expr(q.replace("%s", "x"), f"{w}: annotations.{key} template query", index, errors)
    if len(names) != len(set(names)):
        errors.append(f"{where}: alert names not unique: {names}")

    tw = ALERT_TESTS.relative_to(TOP)
    files = [(ALERT_TESTS.parent / f).resolve() for f in tests_doc.get("rule_files") or []]
    if files != [ALERTS.resolve()]:
        errors.append(f"{tw}: rule_files must be the shipped {where} only, not {tests_doc.get('rule_files')}")
    fires, quiet = set(), set()
    for t in tests_doc.get("tests") or []:
        for c in t.get("alert_rule_test") or []:
            (fires if c.get("exp_alerts") else quiet).add(c.get("alertname"))
    for n in sorted((fires | quiet) - set(names)):
        errors.append(f"{tw}: tests alert {n}, which {where} does not define")
    for n in names:
        if n not in fires:
            errors.append(f"{tw}: no case where {n} fires")
        if n not in quiet:
            errors.append(f"{tw}: no case where {n} stays quiet")
    return used


# -------------------------------------------------------------------- main

def promtool(*args):
    exe = shutil.which("promtool")
    if not exe:
        raise Failure(f"promtool not found (Debian: package prometheus): {DEPS_HINT}")
    r = subprocess.run([exe, *args], capture_output=True, text=True, timeout=300)
    return r.returncode, (r.stdout + r.stderr).strip()


def load_yaml(path):
    import yaml  # checked in main()
    try:
        return yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise Failure(f"{path.relative_to(TOP)}: not YAML: {e}")


def references():
    """{family name} of every l7fast_*/process_* family the dashboard and the
    alert rules query (for the e2e test: all must be in a live scrape)."""
    dash = json.loads(DASHBOARD.read_text())
    exprs = [e for _, e, _ in dashboard_queries(dash)]
    exprs += [str(r.get("expr", "")) for _, r in rule_queries(load_yaml(ALERTS))]
    names = set()
    for e in exprs:
        for s in analyse(e).selectors:
            if s.name not in FOREIGN_SERIES:
                names.add(s.name)
    return names


def check_queries_against(fams):
    """Failures of every dashboard and rule expression against the families
    `fams` (from the source, or a live scrape)."""
    errors = []
    index = series_index(fams)
    dash = json.loads(DASHBOARD.read_text())
    for w, expr, legend in dashboard_queries(dash):
        a = check_expr(expr, f"{DASHBOARD.relative_to(TOP)}: {w}", index, errors, dashboard=True)
        check_legend(legend, a, f"{DASHBOARD.relative_to(TOP)}: {w}", index, errors)
    for w, r in rule_queries(load_yaml(ALERTS)):
        check_expr(str(r.get("expr", "")), f"{ALERTS.relative_to(TOP)}: {w}", index, errors)
    return errors


def run(exposition=None):
    errors = []
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        raise Failure(f"python3 module jsonschema missing (Debian: python3-jsonschema): {DEPS_HINT}")
    try:
        import yaml  # noqa: F401
    except ImportError:
        raise Failure(f"python3 module yaml missing (Debian: python3-yaml): {DEPS_HINT}")

    rc, out = promtool("check", "rules", "--lint=all", "--lint-fatal", str(ALERTS))
    if rc != 0:
        errors.append(f"promtool check rules {ALERTS.relative_to(TOP)} (exit {rc}):\n{out}")
    rc, out = promtool("test", "rules", str(ALERT_TESTS))
    if rc != 0:
        errors.append(f"promtool test rules {ALERT_TESTS.relative_to(TOP)} (exit {rc}):\n{out}")

    fams = load_source_families()
    index = series_index(fams)
    try:
        dash = json.loads(DASHBOARD.read_text())
    except json.JSONDecodeError as e:
        raise Failure(f"{DASHBOARD.relative_to(TOP)}: not JSON: {e}")
    on_dashboard = check_dashboard(dash, index, fams, errors)
    in_rules = check_rules(load_yaml(ALERTS), load_yaml(ALERT_TESTS), index, fams, errors)
    if exposition is not None:
        errors += [f"against {exposition}: {e}" for e in
                   check_queries_against(families_from_exposition(Path(exposition).read_text()))]
    n_alerts = len(rule_queries(load_yaml(ALERTS)))
    n_panels = sum(1 for p in all_panels(dash) if p.get("type") != "row")
    summary = (f"{n_alerts} alerts, {n_panels} panels, {len(dashboard_queries(dash))} dashboard queries; "
               f"{len(fams)} families exported by {METRICS_CPP.relative_to(TOP)}, {len(on_dashboard)} on the "
               f"dashboard, {len(in_rules)} in the alerts")
    return errors, summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--exposition", metavar="FILE",
                    help="also check every query against this scrape of /metrics")
    args = ap.parse_args()
    try:
        errors, summary = run(args.exposition)
    except Failure as e:
        print(f"monitoring check: FAILED: {e}", file=sys.stderr)
        return 1
    for e in errors:
        print(f"monitoring check: {e}", file=sys.stderr)
    if errors:
        print(f"monitoring check: FAILED ({len(errors)} problems); {summary}", file=sys.stderr)
        return 1
    print(f"monitoring check: ok: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
