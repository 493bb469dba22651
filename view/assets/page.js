// page.js draws the plan of a `mscclgo view` page from its embedded data:
// the Chrome trace of one call (a lane per thread block, a box per op,
// arrows from releases to what they released) and the plan's channels,
// then writes a self-check (counts and script errors) into #selfcheck.
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  var data = JSON.parse(document.getElementById("data").textContent);
  var events = data.trace.traceEvents || [];

  function el(name, attrs, parent) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) { e.setAttribute(k, attrs[k]); }
    if (parent) { parent.appendChild(e); }
    return e;
  }

  // Lanes: one per named thread, grouped by process (rank).
  var procs = {}, threads = [], slices = [], starts = {}, finishes = {}, blocked = [];
  events.forEach(function (e) {
    if (e.ph === "i" && e.cat === "blocked") { blocked.push(e); }
    else if (e.ph === "M" && e.name === "process_name") { procs[e.pid] = e.args.name; }
    else if (e.ph === "M" && e.name === "thread_name") { threads.push({pid: e.pid, tid: e.tid, name: e.args.name}); }
    else if (e.ph === "X") { slices.push(e); }
    else if (e.ph === "s") { starts[e.id] = e; }
    else if (e.ph === "f") { finishes[e.id] = e; }
  });
  threads.sort(function (a, b) { return a.pid - b.pid || a.tid - b.tid; });

  var laneH = 16, gap = 3, rankGap = 14, left = 110, width = 1100;
  var total = 0;
  slices.forEach(function (s) { total = Math.max(total, s.ts + s.dur); });
  // A blocked op is drawn at the time its thread block reached it, with
  // room for its mark.
  blocked.forEach(function (b) { total = Math.max(total, b.ts * 1.05 + 1); });
  var scale = total > 0 ? width / total : 1;
  var laneY = {}, y = 4, lastPid = null;
  threads.forEach(function (t) {
    if (t.pid !== lastPid) { y += lastPid === null ? 12 : rankGap; lastPid = t.pid; t.first = true; }
    laneY[t.pid + ":" + t.tid] = y;
    t.y = y;
    y += laneH + gap;
  });
  var axisY = y + 4;
  var svg = el("svg", {width: left + width + 20, height: axisY + 30, id: "lanesvg"}, document.getElementById("lanes"));
  var defs = el("defs", {}, svg);
  var marker = el("marker", {id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto"}, defs);
  el("path", {d: "M0,0 L10,5 L0,10 z", fill: "#c33"}, marker);
  threads.forEach(function (t) {
    if (t.first) {
      var h = el("text", {x: 2, y: t.y - 3, "font-weight": "bold"}, svg);
      h.textContent = procs[t.pid] || ("rank " + t.pid);
    }
    el("rect", {"class": "lane", x: left, y: t.y, width: width, height: laneH, "data-pid": t.pid, "data-tid": t.tid}, svg);
    var l = el("text", {x: 14, y: t.y + laneH - 4}, svg);
    l.textContent = t.name;
  });

  var colors = {data: "#7aa6d8", sync: "#f0b45a", packet: "#8cc984", port: "#c39bd3", other: "#cccccc"};
  function kind(name) {
    if (/pkt/.test(name)) { return "packet"; }
    if (/signal|wait|flush|barrier|sem_|nop/.test(name)) { return "sync"; }
    if (/put|get|copy|reduce|rrc|rre|rs|glres|res|cpy/.test(name)) { return "data"; }
    return "other";
  }
  var legend = document.getElementById("legend");
  ["data", "sync", "packet", "other"].forEach(function (k) {
    var s = document.createElement("span");
    s.innerHTML = '<i style="background:' + colors[k] + '"></i>' + k;
    legend.appendChild(s);
  });

  var tip = document.getElementById("tip");
  function describe(s) {
    var a = s.args || {}, lines = [s.name + "  " + (a.op || "")];
    lines.push("rank " + s.pid + "  tb " + s.tid);
    lines.push("time " + s.ts + " .. " + (s.ts + s.dur) + " " + data.clock);
    if (a.iteration !== undefined) { lines.push("iteration " + a.iteration); }
    lines.push("bytes " + a.bytes);
    if (a.peers) { lines.push("peer " + a.peers.join(",")); }
    if (a.channel) { lines.push("channel " + a.channel); }
    if (a.source) { lines.push("source " + a.source.join("; ")); }
    return lines.join("\n");
  }
  var boxes = 0;
  slices.forEach(function (s, i) {
    var ly = laneY[s.pid + ":" + s.tid];
    if (ly === undefined) { throw new Error("op on an unnamed thread: pid " + s.pid + " tid " + s.tid); }
    var r = el("rect", {"class": "op", x: left + s.ts * scale, y: ly + 1, width: Math.max(s.dur * scale, 1.5), height: laneH - 2,
      fill: colors[kind(s.name)], "data-i": i}, svg);
    r.addEventListener("mousemove", function (ev) {
      tip.textContent = describe(s);
      tip.style.display = "block";
      tip.style.left = (ev.clientX + 12) + "px";
      tip.style.top = (ev.clientY + 12) + "px";
    });
    r.addEventListener("mouseleave", function () { tip.style.display = "none"; });
    boxes++;
  });

  // Blocked ops (a deadlock): a red mark where the thread block stopped,
  // labelled with the op and its .star line; the hover shows its wait.
  var blockedMarks = 0, blockedLabels = [];
  blocked.forEach(function (b) {
    var ly = laneY[b.pid + ":" + b.tid];
    if (ly === undefined) { throw new Error("blocked op on an unnamed thread: pid " + b.pid + " tid " + b.tid); }
    var a = b.args || {}, x = left + b.ts * scale;
    var m = el("rect", {"class": "blocked", x: x, y: ly, width: 8, height: laneH, "data-pid": b.pid, "data-tid": b.tid}, svg);
    var label = "BLOCKED " + (a.op || "") + " " + b.name + (a.source ? " (" + a.source.join("; ") + ")" : "");
    var tt = el("title", {}, m);
    tt.textContent = label + ": " + (a.waiting || "");
    // The label goes on the side of the mark with more room.
    var right = x < left + width / 2;
    var tx = el("text", {"class": "blockedlabel", x: right ? x + 11 : x - 3, y: ly + laneH - 4, "text-anchor": right ? "start" : "end"}, svg);
    tx.textContent = label + ": " + (a.waiting || "");
    blockedLabels.push(tx.textContent);
    blockedMarks++;
  });

  // The time axis under the lanes: about eight ticks at round values.
  var ticks = 0;
  (function () {
    el("line", {"class": "axis", x1: left, y1: axisY, x2: left + width, y2: axisY}, svg);
    var span = total > 0 ? total : 1, raw = span / 8, p10 = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = [1, 2, 5, 10].map(function (k) { return k * p10; }).filter(function (v) { return v >= raw; })[0];
    for (var t = 0; t <= span + 1e-9; t += step) {
      var x = left + t * scale;
      el("line", {"class": "tick", x1: x, y1: axisY, x2: x, y2: axisY + 5}, svg);
      var lab = el("text", {x: x, y: axisY + 16, "text-anchor": "middle"}, svg);
      lab.textContent = Number(t.toPrecision(6));
      ticks++;
    }
    var unit = el("text", {x: left + width + 4, y: axisY + 16}, svg);
    unit.textContent = data.clock;
  })();

  // Flows: an arrow from the end of the releasing op to the start of the
  // released one.
  var flows = 0, unmatched = 0;
  function slicesAt(e) {
    for (var i = 0; i < slices.length; i++) {
      var s = slices[i];
      if (s.pid === e.pid && s.tid === e.tid && s.ts <= e.ts && e.ts <= s.ts + s.dur) { return s; }
    }
    return null;
  }
  Object.keys(starts).forEach(function (id) {
    var a = slicesAt(starts[id]), f = finishes[id], b = f ? slicesAt(f) : null;
    if (!a || !b) { unmatched++; return; }
    var x1 = left + (a.ts + a.dur) * scale, y1 = laneY[a.pid + ":" + a.tid] + laneH / 2;
    var x2 = left + b.ts * scale, y2 = laneY[b.pid + ":" + b.tid] + laneH / 2;
    el("path", {"class": "flow", d: "M" + x1 + "," + y1 + " C" + (x1 + 20) + "," + y1 + " " + (x2 - 20) + "," + y2 + " " + x2 + "," + y2,
      "marker-end": "url(#arrow)"}, svg);
    flows++;
  });
  Object.keys(finishes).forEach(function (id) { if (!starts[id]) { unmatched++; } });

  // Channels: ranks on a circle, an arrow per (rank, peer, type).
  var n = Object.keys(procs).length, R = 90, cx = 130, cy = 120;
  var csvg = el("svg", {width: 420, height: 250, id: "chansvg"}, document.getElementById("channels"));
  var cdefs = el("defs", {}, csvg);
  var chanColors = {memory: "#3a78c2", port: "#8e44ad", switch: "#2e8b57"};
  Object.keys(chanColors).forEach(function (t) {
    var m = el("marker", {id: "ch-" + t, viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto"}, cdefs);
    el("path", {d: "M0,0 L10,5 L0,10 z", fill: chanColors[t]}, m);
  });
  function pos(r) { var a = 2 * Math.PI * r / Math.max(n, 1) - Math.PI / 2; return [cx + R * Math.cos(a), cy + R * Math.sin(a)]; }
  var chans = 0;
  (data.channels || []).forEach(function (c, i) {
    var p = pos(c.from), q = pos(c.to), dx = q[0] - p[0], dy = q[1] - p[1], d = Math.sqrt(dx * dx + dy * dy) || 1;
    var off = c.type === "port" ? 6 : (c.type === "switch" ? -6 : 0);
    var ox = -dy / d * off, oy = dx / d * off;
    var line = el("line", {"class": "chan", x1: p[0] + dx / d * 16 + ox, y1: p[1] + dy / d * 16 + oy, x2: q[0] - dx / d * 16 + ox, y2: q[1] - dy / d * 16 + oy,
      stroke: chanColors[c.type] || "#777", "marker-end": "url(#ch-" + c.type + ")"}, csvg);
    var t = el("title", {}, line);
    t.textContent = c.type + " channels rank " + c.from + " -> rank " + c.to + ": " + c.count;
    chans++;
  });
  for (var r = 0; r < n; r++) {
    var p = pos(r);
    el("circle", {cx: p[0], cy: p[1], r: 15, fill: "#fff", stroke: "#333"}, csvg);
    var t = el("text", {x: p[0], y: p[1] + 4, "text-anchor": "middle"}, csvg);
    t.textContent = r;
  }
  var ly2 = 20;
  Object.keys(chanColors).forEach(function (k) {
    el("line", {x1: 280, y1: ly2, x2: 310, y2: ly2, stroke: chanColors[k], "stroke-width": 2}, csvg);
    var t = el("text", {x: 316, y: ly2 + 4}, csvg);
    t.textContent = k;
    ly2 += 18;
  });

  document.getElementById("selfcheck").textContent = JSON.stringify({
    lanes: document.querySelectorAll("#lanesvg .lane").length,
    ops: document.querySelectorAll("#lanesvg .op").length,
    boxes: boxes, flows: flows, unmatchedFlows: unmatched, channels: chans,
    blocked: blockedMarks, blockedLabels: blockedLabels, ticks: ticks,
    errors: window.viewErrors
  });
})();
