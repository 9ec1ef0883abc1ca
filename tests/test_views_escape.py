"""Every HTML view escapes what a server or a user wrote: a hostile string in every field the
report, the trend page, the fleet page and pytest-html's pieces show comes out as text.

Each field gets its own hostile string (its name inside ``<script>``, quotes and ``</table>``),
so the test knows each one reached the page, and the parsed page holds no script element,
no table the string closed early, and the field's text exactly as written.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from specperf.fleet import page as fleet_page
from specperf.record import files as record_files
from specperf.record import trend as record_trend
from specperf.views import extras, page, trend
from test_report import FINGERPRINT, make_doc


def hostile(field: str) -> str:
    return f"<script>alert(\"{field}\")</script> \"quotes' </table> {field}"


class Parsed(HTMLParser):
    """A page's elements, and its text and attribute values as a browser decodes them."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.starts: list[str] = []
        self.ends: list[str] = []
        self.strings: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.starts.append(tag)
        self.strings += [value for _, value in attrs if value]

    def handle_endtag(self, tag: str) -> None:
        self.ends.append(tag)

    def handle_data(self, data: str) -> None:
        self.strings.append(data)

    def shows(self, field: str) -> bool:
        return any(hostile(field) in s for s in self.strings)


CLASS = "padding"  # the text class renamed to a hostile name (so every case id is hostile)


def _hostile_doc() -> dict[str, Any]:
    """A results document with a hostile string in every field the run page shows."""
    H = hostile
    server = {"url": H("url"), "label": H("label"), "simulated": False, "model": H("model"),
              "fingerprint": {**FINGERPRINT, "draft_model": H("draft model")},
              "notes": [H("server note")], "server_name": H("server name"),
              "flavour": H("flavour"), "api": H("api"), "acceptance_source": H("source")}
    doc = make_doc(commit=5.0, server=server, errors={
        f"t.py::test[{CLASS}-ctx1663]": f"500: {H('error body')}", H("error node"): "x"})
    # every case id and text class name is hostile: rename the class wherever it is written
    doc = json.loads(json.dumps(doc).replace(CLASS, json.dumps(H("class"))[1:-1]))
    doc["settings"]["contexts"].append(1663)
    doc.update(run_id=H("run id"), created=H("created"), suite_version=H("suite"),
               git_revision=H("git"), fingerprint={**doc["fingerprint"], "kernel": H("fp value")},
               fingerprint_differences=[H("fp difference")],
               run={"kind": "full", "label": H("run label")})
    doc["baseline"].update(deployment=H("deployment"), created=H("baseline created"))
    failing = doc["verdicts"][0]
    failing.update(message=f"{H('verdict')} \u2014 {H('diagnosis')}",
                   exact={"status": "unchanged", "message": H("exact")})
    doc["reconcile"] = [{"case_id": H("reconcile case"), "avg_commit": 5.0,
                         "predicted_step_ms": 100.0, "predicted_tok_s": 50.0,
                         "observed_tok_s": 40.0, "change": -0.2, "status": "fail",
                         "message": H("reconcile")}]
    doc["measurements"][next(iter(doc["measurements"]))]["samples"][0]["finish_reason"] = \
        H("finish reason")
    doc["concurrency"] = {"case": {"id": H("concurrency case")}, "fit": None, "gpu_s": 2.0,
                          "levels": [{"concurrency": c, "tok_s": 50.0 / c, "agg_tok_s": 50.0,
                                      "avg_commit": 4.0, "step_ms": 30.0, "gpu_s": 1.0,
                                      "server_step_ms": None, "commit_vs_c1": 0.0,
                                      "step_vs_c1": 0.0} for c in (1, 2)]}
    doc["concurrency_baseline"] = {"deployment": H("c deployment"), "version": 1,
                                   "path": H("c path"), "created": "x", "levels": [1, 2],
                                   "not_judged": H("not judged"),
                                   "fingerprint_differences": [H("c difference")]}
    doc["paths"] = [{"paths": {H("path"): {"measurement": {"case": {"id": H("path case")}},
                                           "route": H("route"), "stream": True}}}]
    doc["acceptance_shapes"] = {H("shape case"): {
        "positions": [0.9, 0.5], "base_positions": [0.9, 0.6], "positions_from": H("from"),
        "along": [4.0, 3.0], "base_along": [], "along_tokens": 100, "along_from": H("along")}}
    return doc


RUN_FIELDS = ("run id", "url", "model", "server name", "flavour", "api", "source", "draft model",
              "fp value", "fp difference", "server note", "error body", "error node", "class",
              "created", "suite", "git", "run label", "deployment", "baseline created",
              "verdict", "diagnosis", "exact", "reconcile", "reconcile case", "finish reason",
              "concurrency case", "c deployment", "c path", "not judged", "c difference",
              "path", "path case", "route", "shape case", "from", "along")


def _assert_escaped(text: str, fields: tuple[str, ...]) -> Parsed:
    parsed = Parsed(text)
    assert "script" not in parsed.starts
    assert "<script>" not in text
    assert parsed.starts.count("table") == parsed.ends.count("table")
    missing = [f for f in fields if not parsed.shows(f)]
    assert missing == []
    return parsed


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    return _hostile_doc()


def test_every_field_of_the_run_page_is_text(doc):
    html = page.render(doc)
    parsed = _assert_escaped(html, RUN_FIELDS)
    assert parsed.starts.count("script") == 0
    assert "&lt;script&gt;alert(&#34;model&#34;)&lt;/script&gt; &#34;quotes&#39; " \
           "&lt;/table&gt; model" in html


def test_every_field_of_the_trend_page_is_text(doc, tmp_path: Path):
    H = hostile
    line = record_files.history_entry(doc, "r/results.json")
    line.update(kind_label=H("kind label"), errors=[H("history error")])
    later = {**line, "run_id": H("later run"), "baseline": {"deployment": H("deployment"),
                                                            "version": 2},
             "fingerprint": {**line["fingerprint"], "draft_model": H("new drafter")}}
    built = record_trend.build([line, later])
    assert len(built.runs) == 2 and built.boundaries
    _assert_escaped(trend.render(built), ("run id", "later run", "created", "label",
                                          "kind label", "deployment", "git", "class",
                                          "history error", "new drafter"))


def test_every_field_of_the_fleet_page_is_text(doc):
    H = hostile
    fleet = {"run_id": H("fleet run"), "duration_s": 3.0, "created": H("fleet created"),
             "endpoints": [{"name": H("endpoint"), "url": H("endpoint url"),
                            "deployment": H("endpoint deployment"), "status": "fail",
                            "counts": H("counts"), "lock_wait_s": 0.5,
                            "lock_lines": [H("lock holder")], "document": doc}]}
    _assert_escaped(fleet_page.render(fleet), ("fleet run", "fleet created", "endpoint",
                                               "endpoint url", "endpoint deployment",
                                               "counts", "lock holder", *RUN_FIELDS))


def test_pytest_html_pieces_are_text(doc):
    data = next(iter(doc["measurements"].values()))
    pieces = [*extras.header_cells([hostile("column")]), *extras.row_cells([hostile("value")]),
              extras.report_link(Path(hostile("report path"))),
              extras.samples(hostile("samples case"), data)]
    _assert_escaped("".join(pieces), ("column", "value", "report path", "samples case",
                                      "finish reason"))
