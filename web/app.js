// lanes dashboard client: polls /api/snapshot once per sampling interval and
// draws each lane's throughput and each flow's cwnd (with its cap), srtt and
// throughput on canvases sized to the page, with legends; no libraries, no
// build step. A flow keeps its colour while it lives (assigned by cookie).
"use strict";

// Flows' colours: Tableau 10 without the realtime lane's red and the
// background lane's grey, so that no flow looks like a lane.
const palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22"];
const dashes = [[], [8, 3], [2, 3], [8, 3, 2, 3]];
const laneColors = { realtime: "#d62728", interactive: "#1f77b4", background: "#7f7f7f", unknown: "#bcbd22" };
const span = 60; // seconds shown
const styles = new Map(); // cookie -> {color, dash}
let nextStyle = 0;

// styleOf gives flow n its own colour (8 distinct ones, then golden-angle
// hues) and, past the palette, a dash pattern as well.
function styleOf(cookie) {
  let s = styles.get(cookie);
  if (!s) {
    const n = nextStyle++;
    const color = n < palette.length ? palette[n] : "hsl(" + Math.round((n * 137.508) % 360) + ",70%,40%)";
    s = { color, dash: dashes[Math.floor(n / palette.length) % dashes.length] };
    styles.set(cookie, s);
  }
  return s;
}

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

// fit sizes a canvas to its box in device pixels and returns a context in CSS pixels.
function fit(canvas) {
  const dpr = window.devicePixelRatio || 1, w = canvas.clientWidth || 300, h = +canvas.dataset.h || 200;
  canvas.style.height = h + "px";
  if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(h * dpr);
  }
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  return { ctx, W: w, H: h };
}

// chart draws lines [{color, dash, width, points:[[t,v]]}] over the last
// `span` s, over shaded bands [[t0, t1]] (with bandLabel on the first).
function chart(canvas, lines, now, unit, bands, bandLabel) {
  const { ctx, W, H } = fit(canvas);
  const L = 44, B = 20, T = 8, R = 8;
  ctx.clearRect(0, 0, W, H);
  let ymax = 0;
  for (const l of lines) for (const p of l.points) if (p[0] >= now - span) ymax = Math.max(ymax, p[1]);
  ymax = niceCeil(ymax || 1);
  const x = t => L + (W - L - R) * (t - (now - span)) / span;
  const y = v => H - B - (H - B - T) * v / ymax;
  ctx.strokeStyle = "#e3e6ea"; ctx.fillStyle = "#555"; ctx.font = "11px sans-serif"; ctx.lineWidth = 1; ctx.setLineDash([]);
  for (let i = 0; i <= 4; i++) {
    const v = ymax * i / 4, yy = y(v);
    ctx.beginPath(); ctx.moveTo(L, yy); ctx.lineTo(W - R, yy); ctx.stroke();
    ctx.fillText(fmt(v), 4, yy + 4);
  }
  const ticks = W < 450 ? 3 : 6;
  for (let i = 0; i <= ticks; i++) {
    const s = span * i / ticks;
    ctx.fillText("-" + Math.round(span - s) + " s", Math.min(x(now - span + s) - 12, W - 30), H - 5);
  }
  ctx.fillText(unit, L + 4, T + 10);
  let labelled = false;
  for (const b of bands || []) {
    const x0 = Math.max(L, x(b[0])), x1 = Math.min(W - R, x(b[1]));
    if (x1 <= x0) continue;
    ctx.fillStyle = "rgba(255, 190, 60, 0.22)";
    ctx.fillRect(x0, T, Math.max(x1 - x0, 2), H - B - T);
    if (bandLabel && !labelled) {
      ctx.fillStyle = "#8a5a00";
      ctx.fillText(bandLabel, Math.min(x0 + 3, W - R - ctx.measureText(bandLabel).width), T + 24);
      labelled = true;
    }
  }
  for (const l of lines) {
    ctx.strokeStyle = l.color; ctx.lineWidth = l.width || 2;
    ctx.setLineDash(l.dash || []);
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

// swatch shows a line's colour and dash in a legend or table.
function swatch(color, dash) {
  const s = el("span", "", "swatch");
  s.style.borderTopColor = color;
  if (dash && dash.length) s.style.borderTopStyle = dash[0] > 3 ? "dashed" : "dotted";
  return s;
}

function legend(id, items) {
  const box = document.getElementById(id);
  box.replaceChildren();
  for (const it of items) {
    const e = el("span");
    e.append(swatch(it.color, it.dash), document.createTextNode(it.label));
    box.append(e);
  }
}

function flowLabel(f) { return (f.comm ? f.comm + " " : "") + f.src + " → " + f.dst; }

function renderHeader(s) {
  const d = document.getElementById("daemon");
  if (s.daemon) {
    d.textContent = "daemon " + s.daemon.version + " · policy " + s.daemon.policy +
      (s.daemon.netns ? " · netns " + (s.daemon.netns.name || "net:[" + s.daemon.netns.inode + "]") : "");
  } else {
    d.textContent = "no daemon: " + (s.daemon_error || "not asked") + " (flows only)";
  }
  document.getElementById("updated").textContent = s.sample_error ? "sampling failed: " + s.sample_error : "";
}

// heldWhy says what holds a background flow at point p: the yield, or
// its wait in the background lane's queue behind the other lanes.
function heldWhy(p) {
  return p.held ? "held by the yield" : p.queued ? "queued behind the other lanes" : "";
}

// heldBands are the time spans in which some flow was held back.
function heldBands(flows, interval) {
  const ts = [];
  for (const f of flows) for (const p of f.points) if (p.held || p.queued) ts.push(p.t);
  ts.sort((a, b) => a - b);
  const bands = [];
  for (const t of ts) {
    const last = bands[bands.length - 1];
    if (last && t - last[1] <= 2.5 * interval) last[1] = t; else bands.push([t - interval / 2, t]);
  }
  return bands;
}

function lastPoint(f) { return f.points[f.points.length - 1] || {}; }
function isHeld(f) { return heldWhy(lastPoint(f)) !== ""; }

// renderLanes draws each lane's throughput, the realtime lane on top and
// thicker, and again on its own scale when it is too small to see beside
// the others (a control loop's kbit/s beside a download's Mbit/s).
function renderLaneCharts(s) {
  const last = l => { const p = l.points[l.points.length - 1]; return p ? p.mbit : 0; };
  const lanes = (s.lanes || []).map(l => ({ color: laneColors[l.lane] || "#333", width: l.lane === "realtime" ? 3 : 2, lane: l.lane,
    label: l.lane + " " + fmt(last(l)) + " Mbit/s", points: l.points.map(p => [p.t, p.mbit]) }));
  lanes.sort((a, b) => (a.lane === "realtime") - (b.lane === "realtime")); // realtime drawn last, on top
  // downloads: each lane's TCP flows' and UDP sockets' received rate, dashed, where it has one
  const down = p => (p.down_mbit || 0) + (p.udp_down_mbit || 0);
  const lastDown = l => { const p = l.points[l.points.length - 1]; return p ? down(p) : 0; };
  const downs = (s.lanes || []).filter(l => l.points.some(p => down(p) > 0)).map(l => ({ color: laneColors[l.lane] || "#333",
    width: 2, dash: [6, 3], lane: l.lane, label: l.lane + " down " + fmt(lastDown(l)) + " Mbit/s",
    points: l.points.map(p => [p.t, down(p)]) }));
  chart(document.getElementById("lanerate"), downs.concat(lanes), s.now, "Mbit/s");
  legend("lane-legend", (s.lanes || []).map(l => lanes.find(x => x.lane === l.lane)).concat(downs));
  document.getElementById("lane-source").textContent = s.lane_source === "queues"
    ? "Solid: what each lane's queues sent (TCP, UDP, QUIC and realtime datagrams). Dashed: what its TCP flows and UDP sockets received (downloads)."
    : "Solid: the sum of each lane's TCP flows' sending (no daemon status: UDP and QUIC not counted). Dashed: what they received (downloads).";
  const rt = lanes.find(l => l.lane === "realtime"), box = document.getElementById("rt-alone");
  const inSpan = l => l.points.filter(p => p[0] >= s.now - span);
  const rtMax = rt ? Math.max(0, ...inSpan(rt).map(p => p[1])) : 0;
  const allMax = Math.max(0, ...lanes.flatMap(l => inSpan(l).map(p => p[1])));
  box.hidden = !(rtMax > 0 && rtMax < allMax / 20);
  if (!box.hidden) chart(document.getElementById("rtrate"), [{ ...rt, points: rt.points.map(p => [p[0], p[1] * 1000]) }], s.now, "kbit/s");
}

function renderCharts(s) {
  renderLaneCharts(s);

  const cw = [], caps = [], rt = [], tp = [];
  for (const f of s.flows) {
    const st = styleOf(f.cookie);
    cw.push({ color: st.color, dash: st.dash, points: f.points.map(p => [p.t, p.cwnd]) });
    if (f.points.some(p => p.cap > 0)) caps.push({ color: st.color, dash: [1, 4], width: 4, points: f.points.filter(p => p.cap > 0).map(p => [p.t, p.cap]) });
    rt.push({ color: st.color, dash: st.dash, points: f.points.map(p => [p.t, p.srtt_ms]) });
    tp.push({ color: st.color, dash: st.dash, points: f.points.map(p => [p.t, p.mbit]) });
  }
  // Caps are drawn last, thick and dotted, so a cap equal to cwnd stays visible.
  chart(document.getElementById("cwnd"), cw.concat(caps), s.now, "segments");
  const bands = heldBands(s.flows, s.interval_s || 0.1);
  chart(document.getElementById("srtt"), rt, s.now, "ms", bands, "background held back");
  const held = s.flows.filter(isHeld), note = document.getElementById("srtt-note");
  const seen = k => s.flows.some(f => f.points.some(p => p[k]));
  const why = [seen("held") ? "by the yield while the foreground carries traffic (a 2-segment window)" : "",
    seen("queued") ? "in the background lane's queue while the other lanes are served first" : ""].filter(x => x);
  note.textContent = bands.length ? "Shaded: background held back " + why.join(", or ") + ". A held flow's srtt" +
    (held.length ? " (now up to " + fmt(Math.max(...held.map(f => lastPoint(f).srtt_ms))) + " ms)" : "") +
    " is its wait behind the foreground, not the path's delay." : "";
  chart(document.getElementById("rate"), tp, s.now, "Mbit/s");
  legend("flow-legend", s.flows.map(f => ({ ...styleOf(f.cookie), label: flowLabel(f) + " (" + f.lane + (isHeld(f) ? ", " + heldWhy(lastPoint(f)) : "") + ")" })));
}

function renderFlows(s) {
  const tb = document.querySelector("#flows tbody");
  tb.replaceChildren();
  for (const f of s.flows) {
    const last = f.points[f.points.length - 1] || {};
    const st = styleOf(f.cookie);
    const tr = el("tr");
    tr.dataset.flow = f.src + " " + f.dst;
    tr.dataset.points = f.points.length;
    const sw = el("td");
    sw.append(swatch(st.color, st.dash));
    tr.append(sw, el("td", f.src + " → " + f.dst), el("td", f.lane), el("td", f.comm ? f.comm + " (" + f.pid + ")" : "—"),
      el("td", f.cong), el("td", f.state + (heldWhy(last) ? " · held" : "")), el("td", last.cwnd), el("td", last.cap || "—"),
      srttCell(last), el("td", fmt(last.mbit || 0)), el("td", fmt(last.recv_mbit || 0)),
      el("td", last.down_cap ? (last.down_cap / 1000).toFixed(1) + " kB" : "—"), el("td", f.total_retrans));
    tb.append(tr);
  }
  const live = new Set(s.flows.map(f => f.cookie));
  for (const c of styles.keys()) if (!live.has(c)) styles.delete(c);
}

// srttCell shows a flow's srtt, marked when the flow is held back.
function srttCell(p) {
  const td = el("td", fmt(p.srtt_ms || 0));
  if (heldWhy(p)) {
    td.append(" ", el("b", "held", "held"));
    td.title = p.held ? "held by the yield: the foreground carries traffic, so this background flow waits at a 2-segment window; its srtt is that wait"
      : "queued behind the other lanes: its segments wait in the background lane's queue while the other lanes are served first; its srtt is that wait";
  }
  return td;
}

function renderCoop(s) {
  const coop = document.getElementById("coop");
  coop.replaceChildren();
  // A controller the policy leaves off is a state, shown last and quiet.
  const sec = document.getElementById("coop-section"), main = sec.parentNode;
  sec.classList.toggle("off", !!s.coop_off);
  if (s.coop_off && sec !== main.lastElementChild) main.append(sec);
  if (!s.coop_off && sec !== main.firstElementChild) main.prepend(sec);
  if (s.coop_off) {
    coop.append(el("div", "off (" + s.coop_off + ")"));
    return;
  }
  if (!s.coop) {
    coop.append(el("div", s.coop_error || "—"));
    return;
  }
  const c = s.coop;
  const line = el("div", "host " + c.host_id + " · N = " + c.n + " · rate " + (c.rate_bits / 1e6).toFixed(2) + " Mbit/s (" + c.rate_source + ") · ");
  line.append(el("b", c.capping ? "capping" : "not capping: " + c.reason, c.capping ? "ok" : "bad"));
  if (!c.authenticated) line.append(el("b", " · peers unauthenticated (limited mode: N grows one peer at a time, up to a bound" + (c.uncounted_peers ? "; " + c.uncounted_peers + " peers wait outside N" : "") + ")", "bad"));
  coop.append(line);
  const d = c.downlink;
  if (d) {
    const dl = el("div", "downlink · N = " + d.n + " · rate " + (d.rate_bits / 1e6).toFixed(2) + " Mbit/s (" + d.rate_source + ") · share " + (d.self_share || 0).toFixed(2) + " · ");
    dl.append(el("b", d.capping ? "capping receive windows" : "not capping: " + d.reason, d.capping ? "ok" : "bad"));
    coop.append(dl);
  }
  const peers = (c.peers || []).map(p => p.addr + (p.counted === false ? " [not counted]" : "") + (p.active ? " (" + p.flows + " flows, " + (p.goodput_bits / 1e6).toFixed(2) + " Mbit/s)" : " (idle)"));
  coop.append(el("div", "peers: " + (peers.join(", ") || "none")));
}

function renderLanes(s) {
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
    for (const a of it.account || []) {
      lanes.append(el("div", accountLine(a)));
      if ((a.shares && a.shares.length) || a.why) lanes.append(el("div", sharesLine(a)));
    }
  }
}

// accountLine is one direction's account, as lanes status prints it: the
// link's capacity estimate, whose its queue is by the last cause test, and
// whether background is held there now.
function accountLine(a) {
  const link = a.capacity_bps ? "link ~" + (a.capacity_bps / 1e6).toFixed(2) + " Mbit/s" : "link not measured";
  const ago = ((a.tested_ago_ms || 0) / 1000).toFixed(1) + " s";
  let queue = "untested";
  if (a.queue_owner === "background" || a.queue_owner === "not background") queue = a.queue_owner + "'s (tested " + ago + " ago)";
  else if (a.queue_owner === "testing") queue = "under test (for " + ago + ")";
  return "account " + a.dir + ": " + link + ", queue: " + queue + ", background " + (a.held ? "held" : "not held");
}

// sharesLine is a direction's lane shares of the link (each lane's rate
// where the link is not measured) and why the background is where it is,
// as lanes status prints it.
function sharesLine(a) {
  let shares = "no lane counters";
  if (a.shares && a.shares.length) {
    shares = a.shares.map(s => s.lane + " " + (a.capacity_bps ? (100 * s.share).toFixed(0) + "%"
      : (s.bps / 1e6).toFixed(2) + " Mbit/s")).join(", ");
    if (a.capacity_bps) shares += " of the link";
  }
  return "\u00a0\u00a0" + a.dir + ": " + shares + "; why: " + (a.why || "?");
}

// renderUDP lists the UDP flows (QUIC included): per socket as the kernel
// reports it, and the background class's 5-tuples no socket claims.
function renderUDP(s) {
  const tb = document.querySelector("#udpflows tbody");
  tb.replaceChildren();
  const flows = s.udp_flows || [];
  let note = flows.length + " UDP flow" + (flows.length === 1 ? "" : "s");
  if (s.udp_more) note += " (and " + s.udp_more + " more the daemon left out)";
  if (s.udp_error) note = "UDP flows: " + s.udp_error;
  document.getElementById("udp-note").textContent = note;
  for (const f of flows) {
    const tr = el("tr");
    tr.dataset.udp = f.src + " " + f.dst;
    tr.dataset.lane = f.lane;
    const remote = f.state === "unconnected" && f.remotes && f.remotes.length ? f.remotes.join(", ") : f.dst;
    const cls = f.bg_held ? el("b", "held (foreground active)", "bad") : el("span", f.bg_class ? "policed" : "—");
    const td = el("td");
    td.append(cls);
    tr.append(el("td", f.src), el("td", remote), el("td", f.lane), el("td", f.why),
      el("td", fmt((f.up_bps || 0) / 1e6)), el("td", fmt((f.down_bps || 0) / 1e6)),
      el("td", f.comm ? f.comm + " (" + f.pid + ")" : "—"), el("td", f.state), td, el("td", f.drops || 0));
    tb.append(tr);
  }
}

let last = null;

function render(s) {
  last = s;
  renderHeader(s);
  renderCharts(s);
  renderFlows(s);
  renderUDP(s);
  renderCoop(s);
  renderLanes(s);
}

window.addEventListener("resize", () => { if (last) renderCharts(last); });

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
