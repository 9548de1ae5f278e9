// lanes dashboard client: polls /api/snapshot once per sampling interval and
// draws each flow's cwnd (with its cap), srtt and throughput on canvases; no
// libraries, no build step.
"use strict";

const colors = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"];
const maxLines = 10;

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

// chart draws series [{color, points:[[t,v]], dashed}] over the last `span` s.
function chart(canvas, lines, now, span, unit) {
  const ctx = canvas.getContext("2d");
  const W = canvas.width, H = canvas.height, L = 48, B = 22, T = 8, R = 8;
  ctx.clearRect(0, 0, W, H);
  let ymax = 0;
  for (const l of lines) for (const p of l.points) if (p[0] >= now - span) ymax = Math.max(ymax, p[1]);
  ymax = niceCeil(ymax || 1);
  const x = t => L + (W - L - R) * (t - (now - span)) / span;
  const y = v => H - B - (H - B - T) * v / ymax;
  ctx.strokeStyle = "#e3e6ea"; ctx.fillStyle = "#555"; ctx.font = "11px sans-serif"; ctx.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {
    const v = ymax * i / 4, yy = y(v);
    ctx.beginPath(); ctx.moveTo(L, yy); ctx.lineTo(W - R, yy); ctx.stroke();
    ctx.fillText(fmt(v), 4, yy + 4);
  }
  for (let s = 0; s <= span; s += span / 6) ctx.fillText("-" + Math.round(span - s) + " s", x(now - span + s) - 12, H - 6);
  ctx.fillText(unit, L + 4, T + 10);
  for (const l of lines) {
    ctx.strokeStyle = l.color; ctx.lineWidth = l.dashed ? 1.5 : 2;
    ctx.setLineDash(l.dashed ? [6, 4] : []);
    ctx.beginPath();
    let started = false;
    for (const p of l.points) {
      if (p[0] < now - span) continue;
      if (!started) { ctx.moveTo(x(p[0]), y(p[1])); started = true; } else ctx.lineTo(x(p[0]), y(p[1]));
    }
    ctx.stroke();
  }
  ctx.setLineDash([]);
}

function niceCeil(v) {
  const e = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * e >= v) return m * e;
  return 10 * e;
}

function fmt(v) { return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2); }

function render(s) {
  const d = document.getElementById("daemon");
  if (s.daemon) {
    d.textContent = "daemon " + s.daemon.version + " · policy " + s.daemon.policy;
    d.className = "";
  } else {
    d.textContent = "no daemon: " + (s.daemon_error || "not asked") + " (flows only)";
  }
  document.getElementById("updated").textContent = s.sample_error ? "sampling failed: " + s.sample_error : "";

  const span = 60, flows = s.flows.slice(0, maxLines);
  const cw = [], rt = [], tp = [];
  flows.forEach((f, i) => {
    const c = colors[i % colors.length];
    cw.push({ color: c, points: f.points.map(p => [p.t, p.cwnd]) });
    if (f.points.some(p => p.cap > 0)) cw.push({ color: c, dashed: true, points: f.points.filter(p => p.cap > 0).map(p => [p.t, p.cap]) });
    rt.push({ color: c, points: f.points.map(p => [p.t, p.srtt_ms]) });
    tp.push({ color: c, points: f.points.map(p => [p.t, p.mbit]) });
  });
  chart(document.getElementById("cwnd"), cw, s.now, span, "segments");
  chart(document.getElementById("srtt"), rt, s.now, span, "ms");
  chart(document.getElementById("rate"), tp, s.now, span, "Mbit/s");

  const tb = document.querySelector("#flows tbody");
  tb.replaceChildren();
  s.flows.forEach((f, i) => {
    const last = f.points[f.points.length - 1] || {};
    const tr = el("tr");
    const sw = el("td"); if (i < maxLines) { const b = el("span", "", "swatch"); b.style.background = colors[i % colors.length]; sw.append(b); }
    tr.append(sw, el("td", f.src + " → " + f.dst), el("td", f.lane), el("td", f.comm ? f.comm + " (" + f.pid + ")" : "—"),
      el("td", f.cong), el("td", f.state), el("td", last.cwnd), el("td", last.cap || "—"),
      el("td", fmt(last.srtt_ms || 0)), el("td", fmt(last.mbit || 0)), el("td", f.total_retrans));
    tb.append(tr);
  });

  const coop = document.getElementById("coop");
  coop.replaceChildren();
  if (s.coop) {
    const c = s.coop;
    const line = el("div", "host " + c.host_id + " · N = " + c.n + " · rate " + (c.rate_bits / 1e6).toFixed(2) + " Mbit/s (" + c.rate_source + ") · ");
    line.append(el("b", c.capping ? "capping" : "not capping: " + c.reason, c.capping ? "ok" : "bad"));
    if (!c.authenticated) line.append(el("b", " · peers unauthenticated (limited mode: N grows one peer at a time, up to a bound" + (c.uncounted_peers ? "; " + c.uncounted_peers + " peers wait outside N" : "") + ")", "bad"));
    coop.append(line);
    const peers = (c.peers || []).map(p => p.addr + (p.counted === false ? " [not counted]" : "") + (p.active ? " (" + p.flows + " flows, " + (p.goodput_bits / 1e6).toFixed(2) + " Mbit/s)" : " (idle)"));
    coop.append(el("div", "peers: " + (peers.join(", ") || "none")));
  } else {
    coop.append(el("div", s.coop_error || "—"));
  }

  const lanes = document.getElementById("lanes");
  lanes.replaceChildren();
  for (const it of (s.daemon && s.daemon.interfaces) || []) {
    lanes.append(el("div", it.name + ": " + it.mode + (it.uplink_bps ? " · uplink " + (it.uplink_bps / 1e6).toFixed(2) + " Mbit/s" : "")));
    const t = el("table");
    const h = el("tr");
    for (const n of ["lane", "packets", "bytes", "drops", "backlog"]) h.append(el("th", n));
    t.append(h);
    for (const l of it.lanes) {
      const r = el("tr");
      r.append(el("td", l.lane), el("td", l.packets), el("td", l.bytes), el("td", l.drops), el("td", l.backlog_bytes + " B"));
      t.append(r);
    }
    lanes.append(t);
  }
}

async function poll() {
  let wait = 1000;
  try {
    const r = await fetch("api/snapshot", { cache: "no-store" });
    const s = await r.json();
    render(s);
    wait = Math.max(200, (s.interval_s || 1) * 1000);
  } catch (e) {
    document.getElementById("daemon").textContent = "dashboard unreachable: " + e;
  }
  setTimeout(poll, wait);
}
poll();
