// page.js draws the plan of a `mscclgo view` page from its embedded data:
// the Chrome trace of one call (a box per op on its rank and thread
// block), the flows between ops, the critical path and the plan's
// channels, then writes a self-check (counts and script errors) into
// #selfcheck.
//
// A big plan stays readable: a rank's thread blocks are folded into one
// lane of thin strips unless there are few lanes in all (a click on the
// rank unfolds them); arrows are drawn one per flow when there are few,
// else bundled per pair of ranks and kinds of op, drawn by default only
// when there are few bundles; a click on an op draws its own arrows
// instead. The URL's fragment sets the initial state, for links
// and screenshots: #unfold=all or #unfold=0,3, #select=N (slice N),
// #arrows=all.
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  var data = JSON.parse(document.getElementById("data").textContent);
  var events = data.trace.traceEvents || [];
  // A readable density: at most MAX_LANES thread-block lanes unfolded by
  // default, at most MAX_ARROWS arrows drawn at once by default.
  var MAX_LANES = 16, MAX_ARROWS = 24;

  function el(name, attrs, parent) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) { e.setAttribute(k, attrs[k]); }
    if (parent) { parent.appendChild(e); }
    return e;
  }

  var procs = {}, threads = [], slices = [], blocked = [];
  events.forEach(function (e) {
    if (e.ph === "i" && e.cat === "blocked") { blocked.push(e); }
    else if (e.ph === "M" && e.name === "process_name") { procs[e.pid] = e.args.name; }
    else if (e.ph === "M" && e.name === "thread_name") { threads.push({pid: e.pid, tid: e.tid, name: e.args.name}); }
    else if (e.ph === "X") { slices.push(e); }
  });
  threads.sort(function (a, b) { return a.pid - b.pid || a.tid - b.tid; });
  var ranks = [], tbsOf = {};
  threads.forEach(function (t) {
    if (!tbsOf[t.pid]) { tbsOf[t.pid] = []; ranks.push(t.pid); }
    t.index = tbsOf[t.pid].length;
    tbsOf[t.pid].push(t);
  });
  var laneOf = {};
  threads.forEach(function (t) { laneOf[t.pid + ":" + t.tid] = t; });

  // Flows: [from, to] slice indices; incoming and outgoing per slice.
  var flows = [], unmatched = 0, inFlows = {}, outFlows = {};
  (data.flows || []).forEach(function (f) {
    if (!slices[f[0]] || !slices[f[1]]) { unmatched++; return; }
    var i = flows.length;
    flows.push({from: f[0], to: f[1]});
    (inFlows[f[1]] = inFlows[f[1]] || []).push(i);
    (outFlows[f[0]] = outFlows[f[0]] || []).push(i);
  });
  // Bundles: the flows from one rank to another between the same two
  // kinds of op (one phase of the algorithm), as one arrow from the
  // median release to the median op it released.
  var bundles = [], bundleOf = {};
  flows.forEach(function (f) {
    var a = slices[f.from], b = slices[f.to];
    if (a.pid === b.pid) { return; }
    var k = a.pid + ">" + b.pid + ":" + a.name + ">" + b.name;
    if (!bundleOf[k]) { bundleOf[k] = {from: a.pid, to: b.pid, what: a.name + " -> " + b.name, ends: [], starts: []}; bundles.push(bundleOf[k]); }
    bundleOf[k].ends.push(a.ts + a.dur);
    bundleOf[k].starts.push(Math.max(b.ts, a.ts + a.dur));
  });
  function median(xs) { var s = xs.slice().sort(function (x, y) { return x - y; }); return s[Math.floor(s.length / 2)]; }

  // The wait of an op: from its start to the end of the latest op that
  // released it; drawn lighter than the rest.
  function releasedAt(i) {
    var s = slices[i], t = s.ts;
    (inFlows[i] || []).forEach(function (fi) { var a = slices[flows[fi].from]; t = Math.max(t, a.ts + a.dur); });
    return Math.min(t, s.ts + s.dur);
  }

  // State, from the URL's fragment.
  var state = {unfolded: {}, selected: -1, allArrows: false};
  var defaultUnfold = threads.length <= MAX_LANES;
  ranks.forEach(function (r) { state.unfolded[r] = defaultUnfold; });
  (location.hash || "").replace(/^#/, "").split("&").forEach(function (kv) {
    var p = kv.split("="), v = p[1] || "";
    if (p[0] === "unfold") {
      ranks.forEach(function (r) { state.unfolded[r] = v === "all" || v.split(",").indexOf(String(r)) >= 0; });
    } else if (p[0] === "select" && slices[Number(v)]) {
      state.selected = Number(v);
    } else if (p[0] === "arrows") {
      state.allArrows = v === "all";
    }
  });

  var laneH = 16, gap = 3, rankGap = 18, left = 120, width = 1080;
  var total = 0;
  slices.forEach(function (s) { total = Math.max(total, s.ts + s.dur); });
  // A blocked op is drawn at the time its thread block reached it, with
  // room for its mark.
  blocked.forEach(function (b) { total = Math.max(total, b.ts * 1.05 + 1); });
  var scale = total > 0 ? width / total : 1;

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
  var w = document.createElement("span");
  w.innerHTML = '<i style="background:' + colors.packet + ';opacity:0.3"></i>waiting (until the op that released it ended)';
  legend.appendChild(w);

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
    lines.push("(click: its arrows)");
    return lines.join("\n");
  }
  function hover(node, text) {
    node.addEventListener("mousemove", function (ev) {
      tip.textContent = text();
      tip.style.display = "block";
      tip.style.left = (ev.clientX + 12) + "px";
      tip.style.top = (ev.clientY + 12) + "px";
    });
    node.addEventListener("mouseleave", function () { tip.style.display = "none"; });
  }

  // The controls above the lanes.
  var controls = document.getElementById("controls");
  function button(label, f) {
    var b = document.createElement("button");
    b.textContent = label;
    b.addEventListener("click", f);
    controls.appendChild(b);
    return b;
  }
  button("unfold all ranks", function () { ranks.forEach(function (r) { state.unfolded[r] = true; }); render(); });
  button("fold all ranks", function () { ranks.forEach(function (r) { state.unfolded[r] = false; }); render(); });
  var allBox = document.createElement("label");
  allBox.innerHTML = '<input type="checkbox" id="allarrows"> all arrows, bundled per pair of ranks and kinds of op (' + bundles.length + ")";
  controls.appendChild(allBox);
  var hint = document.createElement("span");
  hint.className = "hint";
  hint.textContent = "click a rank to unfold its thread blocks, an op for its arrows";
  controls.appendChild(hint);
  var allInput = document.getElementById("allarrows");
  allInput.checked = state.allArrows;
  allInput.addEventListener("change", function () { state.allArrows = allInput.checked; render(); });

  var holder = document.getElementById("lanes");
  var counts = {};

  function render() {
    holder.textContent = "";
    counts = {lanes: 0, rankLanes: 0, ops: 0, arrows: 0, ticks: 0, blocked: 0, blockedLabels: [], critical: 0};
    // Rows: the critical path, then per rank its folded lane or its
    // thread blocks' lanes.
    var y = 4, rows = [], rankY = {}, stripOf = {};
    var critY = y + 12;
    y = critY + laneH + rankGap;
    ranks.forEach(function (r) {
      var tbs = tbsOf[r];
      rankY[r] = y;
      if (state.unfolded[r]) {
        tbs.forEach(function (t) {
          stripOf[r + ":" + t.tid] = {y: y + 1, h: laneH - 2};
          rows.push({kind: "tb", rank: r, t: t, y: y, h: laneH});
          y += laneH + gap;
        });
      } else {
        var h = Math.max(12, Math.min(32, 3 * tbs.length)), sh = h / tbs.length;
        tbs.forEach(function (t, i) { stripOf[r + ":" + t.tid] = {y: y + i * sh, h: Math.max(sh - 0.5, 1)}; });
        rows.push({kind: "rank", rank: r, y: y, h: h});
        y += h + gap;
      }
      y += rankGap - gap;
    });
    var axisY = y;
    var svg = el("svg", {width: left + width + 30, height: axisY + 30, id: "lanesvg"}, holder);
    var defs = el("defs", {}, svg);
    [["arrow", "#c33"], ["arrowsel", "#06c"]].forEach(function (m) {
      var mk = el("marker", {id: m[0], viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto"}, defs);
      el("path", {d: "M0,0 L10,5 L0,10 z", fill: m[1]}, mk);
    });
    svg.addEventListener("click", function (ev) {
      if (ev.target === svg) { state.selected = -1; render(); }
    });

    // The critical path's row.
    var crit = data.critical || [];
    var ct = el("text", {x: 2, y: critY - 3, "font-weight": "bold"}, svg);
    ct.textContent = "critical path";
    el("rect", {"class": "lane critlane", x: left, y: critY, width: width, height: laneH}, svg);
    var critRanks = {}, critKinds = {};
    var prevEnd = 0;
    crit.forEach(function (i) {
      var s = slices[i];
      if (!s) { return; }
      // Each op from where the one before it released it.
      var from = Math.max(s.ts, prevEnd), end = s.ts + s.dur;
      prevEnd = end;
      critRanks[s.pid] = true;
      critKinds[kind(s.name)] = (critKinds[kind(s.name)] || 0) + (end - from);
      var r = el("rect", {"class": "op crit", x: left + from * scale, y: critY + 1, width: Math.max((end - from) * scale, 1.5), height: laneH - 2,
        fill: colors[kind(s.name)]}, svg);
      if ((end - from) * scale > 60) {
        var cl = el("text", {"class": "oplabel", x: left + from * scale + 3, y: critY + laneH - 4}, svg);
        cl.textContent = (s.name + " rank " + s.pid + " tb " + s.tid).slice(0, Math.floor(((end - from) * scale - 6) / 6));
      }
      hover(r, function () { return "critical path\n" + describe(s); });
      r.addEventListener("click", function () { state.selected = i; render(); });
      counts.critical++;
    });
    var csum = el("text", {x: 14, y: critY + laneH - 4, "class": "critsum"}, svg);
    csum.textContent = crit.length + " ops";
    var summary = document.getElementById("critical");
    var kinds = Object.keys(critKinds).sort(function (a, b) { return critKinds[b] - critKinds[a]; });
    var span = 0;
    kinds.forEach(function (k) { span += critKinds[k]; });
    summary.textContent = "Critical path: " + crit.length + " ops on " + Object.keys(critRanks).length + " rank(s); its time by kind: " +
      kinds.map(function (k) { return k + " " + Math.round(100 * critKinds[k] / (span || 1)) + "%"; }).join(", ") +
      (crit.length ? "; it ends with " + slices[crit[crit.length - 1]].name + " on rank " + slices[crit[crit.length - 1]].pid + "." : ".");

    // Lanes and their labels.
    rows.forEach(function (row) {
      var r = row.rank;
      if (row.kind === "tb" && row.t.index === 0 || row.kind === "rank") {
        var h = el("text", {x: 2, y: row.y - 3, "font-weight": "bold", "class": "rankname", "data-rank": r}, svg);
        h.textContent = (state.unfolded[r] ? "\u25be " : "\u25b8 ") + (procs[r] || ("rank " + r)) + " (" + tbsOf[r].length + " tb)";
        h.addEventListener("click", function () { state.unfolded[r] = !state.unfolded[r]; render(); });
      }
      if (row.kind === "tb") {
        el("rect", {"class": "lane", x: left, y: row.y, width: width, height: row.h, "data-pid": r, "data-tid": row.t.tid}, svg);
        var l = el("text", {x: 14, y: row.y + row.h - 4}, svg);
        l.textContent = row.t.name;
        counts.lanes++;
      } else {
        var lane = el("rect", {"class": "lane rankfold", x: left, y: row.y, width: width, height: row.h, "data-pid": r}, svg);
        lane.addEventListener("click", function () { state.unfolded[r] = true; render(); });
        var f = el("text", {x: 14, y: row.y + row.h / 2 + 4, "class": "foldnote"}, svg);
        f.textContent = tbsOf[r].length + " tb folded";
        counts.rankLanes++;
      }
    });

    // Op boxes: the wait lighter, the rest solid.
    slices.forEach(function (s, i) {
      var st = stripOf[s.pid + ":" + s.tid];
      if (!st) { throw new Error("op on an unnamed thread: pid " + s.pid + " tid " + s.tid); }
      var g = el("g", {"class": "op" + (i === state.selected ? " selected" : ""), "data-i": i}, svg);
      var rel = releasedAt(i), x0 = left + s.ts * scale, xr = left + rel * scale, x1 = left + (s.ts + s.dur) * scale;
      if (xr > x0 + 0.5) {
        el("rect", {"class": "wait", x: x0, y: st.y, width: xr - x0, height: st.h, fill: colors[kind(s.name)]}, g);
      }
      el("rect", {"class": "work", x: Math.min(xr, x1 - 1.5), y: st.y, width: Math.max(x1 - xr, 1.5), height: st.h, fill: colors[kind(s.name)]}, g);
      if (state.unfolded[s.pid] && x1 - xr > 40) {
        // The op's type on boxes wide enough to hold it.
        var lab = el("text", {"class": "oplabel", x: xr + 3, y: st.y + st.h - 3}, g);
        lab.textContent = s.name.slice(0, Math.floor((x1 - xr - 6) / 6));
      }
      hover(g, function () { return describe(s); });
      g.addEventListener("click", function (ev) { ev.stopPropagation(); state.selected = state.selected === i ? -1 : i; render(); });
      counts.ops++;
    });

    // Blocked ops (a deadlock): a red mark where the thread block stopped,
    // labelled with the op and its .star line; the hover shows its wait.
    blocked.forEach(function (b) {
      var st = stripOf[b.pid + ":" + b.tid];
      if (!st) { throw new Error("blocked op on an unnamed thread: pid " + b.pid + " tid " + b.tid); }
      var a = b.args || {}, x = left + b.ts * scale;
      var m = el("rect", {"class": "blocked", x: x, y: st.y, width: 8, height: Math.max(st.h, 3), "data-pid": b.pid, "data-tid": b.tid}, svg);
      var label = "BLOCKED " + (a.op || "") + " " + b.name + (a.source ? " (" + a.source.join("; ") + ")" : "");
      var tt = el("title", {}, m);
      tt.textContent = label + ": " + (a.waiting || "");
      counts.blockedLabels.push(label + ": " + (a.waiting || ""));
      counts.blocked++;
      if (state.unfolded[b.pid]) {
        // The label goes on the side of the mark with more room.
        var right = x < left + width / 2;
        var tx = el("text", {"class": "blockedlabel", x: right ? x + 11 : x - 3, y: st.y + st.h - 3, "text-anchor": right ? "start" : "end"}, svg);
        tx.textContent = label + ": " + (a.waiting || "");
      }
    });

    // Arrows: the selected op's own, or the bundles when few (or asked
    // for).
    function center(s, t) {
      var st = stripOf[s.pid + ":" + s.tid];
      return [left + t * scale, st.y + st.h / 2];
    }
    function curve(p, q, cls, marker, title, sw) {
      // Far apart in time: an S from left to right; close: a bow to the
      // right, without a loop.
      var c1 = q[0] - p[0] >= 40 ? [p[0] + 20, p[1], q[0] - 20, q[1]] : [p[0] + 14, p[1], q[0] + 14, q[1]];
      var path = el("path", {"class": cls, d: "M" + p[0] + "," + p[1] + " C" + c1[0] + "," + c1[1] + " " + c1[2] + "," + c1[3] + " " + q[0] + "," + q[1],
        "marker-end": "url(#" + marker + ")"}, svg);
      if (sw) { path.setAttribute("stroke-width", sw); }
      var t = el("title", {}, path);
      t.textContent = title;
      counts.arrows++;
    }
    if (state.selected >= 0) {
      var i = state.selected;
      (inFlows[i] || []).concat(outFlows[i] || []).forEach(function (fi) {
        var f = flows[fi], a = slices[f.from], b = slices[f.to];
        curve(center(a, a.ts + a.dur), center(b, Math.max(b.ts, a.ts + a.dur)), "flow sel", "arrowsel", a.name + " rank " + a.pid + " tb " + a.tid + " -> " + b.name + " rank " + b.pid + " tb " + b.tid);
      });
    } else if (!state.allArrows && flows.length <= MAX_ARROWS) {
      // Few flows (a small ring): each its own arrow.
      flows.forEach(function (f) {
        var a = slices[f.from], b = slices[f.to];
        curve(center(a, a.ts + a.dur), center(b, Math.max(b.ts, a.ts + a.dur)), "flow", "arrow", a.name + " rank " + a.pid + " tb " + a.tid + " -> " + b.name + " rank " + b.pid + " tb " + b.tid);
      });
    } else if (state.allArrows || bundles.length <= MAX_ARROWS) {
      bundles.forEach(function (b) {
        var ya = rankY[b.from] + laneH / 2, yb = rankY[b.to] + laneH / 2;
        var p = [left + median(b.ends) * scale, ya], q = [left + median(b.starts) * scale, yb];
        curve(p, q, "flow bundle", "arrow", b.ends.length + " release(s) rank " + b.from + " -> rank " + b.to + " (" + b.what + ")", Math.min(1 + Math.log(b.ends.length) / Math.LN2, 5));
      });
    }

    // The time axis under the lanes: about eight ticks at round values.
    el("line", {"class": "axis", x1: left, y1: axisY, x2: left + width, y2: axisY}, svg);
    var tspan = total > 0 ? total : 1, raw = tspan / 8, p10 = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = [1, 2, 5, 10].map(function (k) { return k * p10; }).filter(function (v) { return v >= raw; })[0];
    for (var t = 0; t <= tspan + 1e-9; t += step) {
      var x = left + t * scale;
      el("line", {"class": "tick", x1: x, y1: axisY, x2: x, y2: axisY + 5}, svg);
      var lab = el("text", {x: x, y: axisY + 16, "text-anchor": "middle"}, svg);
      lab.textContent = Number(t.toPrecision(6));
      counts.ticks++;
    }
    var unit = el("text", {x: left + width + 4, y: axisY + 16}, svg);
    unit.textContent = data.clock;
    writeSelfCheck();
  }

  // Channels: up to CIRCLE_RANKS ranks on a circle with an arrow per
  // (rank, peer, type); more as a matrix, a row per rank and a column per
  // peer, each cell split among the channel types it has, with counts.
  var CIRCLE_RANKS = 4;
  var n = Object.keys(procs).length;
  var chanColors = {memory: "#3a78c2", port: "#8e44ad", switch: "#2e8b57"};
  var chans = 0, chanHolder = document.getElementById("channels");
  function chanLegend(svg, x, y) {
    Object.keys(chanColors).forEach(function (k) {
      el("line", {x1: x, y1: y, x2: x + 30, y2: y, stroke: chanColors[k], "stroke-width": 4}, svg);
      var t = el("text", {x: x + 36, y: y + 4}, svg);
      t.textContent = k;
      y += 18;
    });
  }
  if (n <= CIRCLE_RANKS) {
    var R = 90, cx = 130, cy = 120;
    var csvg = el("svg", {width: 420, height: 250, id: "chansvg"}, chanHolder);
    var cdefs = el("defs", {}, csvg);
    Object.keys(chanColors).forEach(function (t) {
      var m = el("marker", {id: "ch-" + t, viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto"}, cdefs);
      el("path", {d: "M0,0 L10,5 L0,10 z", fill: chanColors[t]}, m);
    });
    var pos = function (r) { var a = 2 * Math.PI * r / Math.max(n, 1) - Math.PI / 2; return [cx + R * Math.cos(a), cy + R * Math.sin(a)]; };
    (data.channels || []).forEach(function (c) {
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
    chanLegend(csvg, 280, 20);
  } else {
    var cs = Math.max(14, Math.min(28, Math.floor(440 / n))), mx = 70, my = 36;
    var msvg = el("svg", {width: mx + n * cs + 150, height: my + n * cs + 10, id: "chansvg"}, chanHolder);
    var head = el("text", {x: mx, y: 12}, msvg);
    head.textContent = "to rank \u2192 (rows: from rank; number: channels)";
    var cells = {};
    (data.channels || []).forEach(function (c) { (cells[c.from + ":" + c.to] = cells[c.from + ":" + c.to] || []).push(c); });
    for (var i = 0; i < n; i++) {
      var tc = el("text", {x: mx + i * cs + cs / 2, y: my - 6, "text-anchor": "middle"}, msvg);
      tc.textContent = i;
      var tr = el("text", {x: mx - 6, y: my + i * cs + cs / 2 + 4, "text-anchor": "end"}, msvg);
      tr.textContent = "rank " + i;
      for (var j = 0; j < n; j++) {
        var x = mx + j * cs, yy = my + i * cs;
        el("rect", {x: x, y: yy, width: cs - 1, height: cs - 1, fill: i === j ? "#ddd" : "#f6f6f6"}, msvg);
        var list = cells[i + ":" + j] || [];
        list.forEach(function (c, k) {
          var w = (cs - 1) / list.length;
          var rect = el("rect", {"class": "chancell", x: x + k * w, y: yy, width: w, height: cs - 1, fill: chanColors[c.type] || "#777"}, msvg);
          var t = el("title", {}, rect);
          t.textContent = c.type + " channels rank " + c.from + " -> rank " + c.to + ": " + c.count;
          chans++;
        });
        if (list.length > 0 && cs >= 16) {
          var sum = 0;
          list.forEach(function (c) { sum += c.count; });
          var tl = el("text", {x: x + cs / 2, y: yy + cs / 2 + 4, "text-anchor": "middle", fill: "#fff", "pointer-events": "none"}, msvg);
          tl.textContent = sum;
        }
      }
    }
    chanLegend(msvg, mx + n * cs + 20, my + 10);
  }

  // Chunk flow: small multiples, a grid per step with a row per rank and
  // a column per chunk of each buffer (input | output | scratch); a cell
  // written in the step is filled with the colour of the rank whose data
  // it then holds (Move.color) and shows the rank it is copied from (a
  // sum of several sources: a black corner); cells written in earlier
  // steps are grey.
  var cf = data.chunkflow || {steps: 0, ranks: 0, buffers: [], moves: [], colors: []};
  var cfHolder = document.getElementById("chunkflow");
  var cfCheck = {panels: [], cells: 0};
  (function () {
    var bufs = cf.buffers || [], moves = cf.moves || [], nr = cf.ranks;
    if (!cf.steps || !bufs.length) { cfHolder.textContent = "no data moves"; return; }
    var cols = 0;
    bufs.forEach(function (b) { cols += b.chunks; });
    var bgap = 8, lx = 30, ty = 30;
    var cell = Math.max(6, Math.min(18, Math.floor((330 - bgap * (bufs.length - 1)) / cols), Math.floor(300 / Math.max(nr, 1))));
    var bx = {}, x = lx;
    bufs.forEach(function (b) { bx[b.name] = x; x += b.chunks * cell + bgap; });
    var pw = Math.max(x - bgap + 4, 170), ph = ty + nr * cell + 4;
    var note = document.createElement("div");
    note.className = "hint";
    note.textContent = "A grid per step: a row per rank, a column per chunk of each buffer. A coloured cell is written in that step, " +
      "in the colour of the rank whose data it then holds, with the number of the rank it is copied from in that step; " +
      "\u03a3: it then holds a sum of several ranks' data (coloured as the rank it comes from); a black corner: this step sums several sources into it " +
      "(hover for them); grey: written in an earlier step. " +
      "A step is a round of synchronization: the most signals, packets, semaphores or barriers on a chain of ops leading to the op." +
      (cf.clipped ? " " + cf.clipped + " writes past chunk " + 64 + " are not drawn." : "");
    cfHolder.appendChild(note);
    var legend = document.createElement("div");
    legend.className = "legend";
    for (var r = 0; r < nr; r++) {
      var sp = document.createElement("span"), sw = document.createElement("i");
      sw.style.background = cf.colors[r];
      sp.appendChild(sw);
      sp.appendChild(document.createTextNode("rank " + r));
      legend.appendChild(sp);
    }
    cfHolder.appendChild(legend);
    var grid = document.createElement("div");
    grid.id = "cfgrid";
    cfHolder.appendChild(grid);
    var written = {};
    function place(p) { return p.buffer + "[" + p.chunk + (p.count > 1 ? ":" + (p.chunk + p.count) : "") + "] of rank " + p.rank; }
    for (var s = 0; s < cf.steps; s++) {
      var panel = document.createElement("div");
      panel.className = "cfpanel";
      grid.appendChild(panel);
      var svg = el("svg", {width: pw, height: ph}, panel);
      var mine = moves.filter(function (m) { return m.step === s; });
      var title = el("text", {x: lx, y: 11, "font-weight": "bold"}, svg);
      title.textContent = "step " + (s + 1) + " of " + cf.steps + ": " + mine.length + " write" + (mine.length === 1 ? "" : "s");
      bufs.forEach(function (b) {
        var t = el("text", {x: bx[b.name], y: ty - 5}, svg);
        t.textContent = b.name;
      });
      for (var rr = 0; rr < nr; rr++) {
        var t = el("text", {x: lx - 4, y: ty + rr * cell + cell / 2 + 3, "text-anchor": "end", "font-size": Math.min(10, cell) + "px"}, svg);
        t.textContent = rr;
        bufs.forEach(function (b) {
          for (var c = 0; c < b.chunks; c++) {
            el("rect", {x: bx[b.name] + c * cell, y: ty + rr * cell, width: cell - 1, height: cell - 1,
              fill: written[rr + ":" + b.name + ":" + c] ? "#c8c8c8" : "#f2f2f2"}, svg);
          }
        });
      }
      mine.forEach(function (m) {
        var x0 = bx[m.dst.buffer] + m.dst.chunk * cell, y0 = ty + m.dst.rank * cell;
        var rect = el("rect", {"class": "cfcell", x: x0, y: y0, width: m.dst.count * cell - 1, height: cell - 1, fill: cf.colors[m.color] || "#777"}, svg);
        var tt = el("title", {}, rect);
        tt.textContent = "step " + (s + 1) + ": " + m.op + " writes " + place(m.dst) + " from " +
          (m.src.length ? m.src.map(place).join(m.reduce ? " + " : ", ") : "nothing") + (m.source ? " (" + m.source + ")" : "") +
          "\nit then holds the data of rank" + (m.origin.length > 1 ? "s " : " ") + m.origin.join(", ");
        if (m.src.length > 1) {
          el("path", {d: "M" + (x0 + m.dst.count * cell - 1 - Math.max(3, cell / 3)) + "," + y0 + " h" + Math.max(3, cell / 3) + " v" + Math.max(3, cell / 3) + " z", fill: "#111", "pointer-events": "none"}, svg);
        }
        if (cell >= 10) {
          var lab = el("text", {x: x0 + cell / 2, y: y0 + cell / 2 + 3, "text-anchor": "middle", "font-size": Math.min(10, cell - 3) + "px", "pointer-events": "none"}, svg);
          lab.textContent = m.origin.length > 1 ? "\u03a3" : m.from;
        }
        cfCheck.cells++;
      });
      mine.forEach(function (m) {
        for (var c = 0; c < m.dst.count; c++) { written[m.dst.rank + ":" + m.dst.buffer + ":" + (m.dst.chunk + c)] = true; }
      });
      cfCheck.panels.push({step: s, x0: 0, y0: 0, cell: cell, bx: bx, ty: ty, svg: svg});
    }
  })();

  // The boxes of the page's main parts and of the chunk-flow panels, in
  // CSS pixels of the document, for the layout test.
  function box(node) {
    var b = node.getBoundingClientRect();
    return {x: b.left + window.scrollX, y: b.top + window.scrollY, w: b.width, h: b.height};
  }
  function layout() {
    var out = [];
    ["title", "diagnosis", "meta", "chunkflow", "legend", "lanes", "channels", "chart"].forEach(function (id) {
      var node = document.getElementById(id);
      if (node) { var b = box(node); b.id = id; out.push(b); }
    });
    return out;
  }

  function writeSelfCheck() {
    document.getElementById("selfcheck").textContent = JSON.stringify({
      lanes: counts.lanes, rankLanes: counts.rankLanes, tbLanes: threads.length,
      ops: document.querySelectorAll("#lanesvg g.op").length, boxes: counts.ops,
      flows: flows.length, unmatchedFlows: unmatched, bundles: bundles.length, arrows: counts.arrows,
      critical: counts.critical, channels: chans,
      chunkSteps: cf.steps || 0, chunkCells: cfCheck.cells, layout: layout(), documentWidth: document.documentElement.scrollWidth,
      panels: cfCheck.panels.map(function (p) { var b = box(p.svg); return {step: p.step, x: b.x, y: b.y, w: b.w, h: b.h, cell: p.cell, top: p.ty, columns: p.bx}; }),
      blocked: counts.blocked, blockedLabels: counts.blockedLabels, ticks: counts.ticks,
      errors: window.viewErrors
    });
  }
  render();
})();
