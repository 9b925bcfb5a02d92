// The therapist's console page (docs/console-web.md): one WebSocket to the web process,
// a heartbeat every 0.25 s, the run's status, ticks, answers and alarms shown; the console's
// requests sent as the controlling page's. GO is the crutch's; the E-stop is never here.
"use strict";
(function () {
  const HEARTBEAT_MS = 250;   // the page's "alive" (a controlling page silent 1 s stops a walk)
  const DEAF_MS = 1000;       // not hearing the PC this long: an alarm on the page
  const SPEED_STEP = 0.05;    // m/s a tap
  const STEP_STEP = 0.05;     // m a tap
  const LEVEL_STEP = 0.1;     // of 1 a tap
  const END_ARM_MS = 3000;    // END takes a second tap within 3 s
  const $ = (id) => document.getElementById(id);
  const S = { client: null, role: "unpaired", controller: null, config: null, status: null,
              tick: null, alarms: [], answers: [], ended: null, heard: 0, rid: 0,
              waiting: new Map(), ws: null, notice: "" };

  // ------------------------------------------------------------------ the connection
  function connect() {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const ws = new WebSocket(scheme + location.host + "/ws");
    S.ws = ws;
    ws.onopen = () => { S.heard = performance.now(); render(); };
    ws.onmessage = (e) => { S.heard = performance.now(); take(JSON.parse(e.data)); };
    ws.onclose = () => {
      S.ws = null; S.role = "unpaired"; S.controller = null;
      for (const [, w] of S.waiting) w.resolve({ refused: "the page's connection closed" });
      S.waiting.clear();
      render();
      if (!S.ended) setTimeout(connect, 1000);
    };
  }

  function send(msg) {
    if (S.ws && S.ws.readyState === WebSocket.OPEN) { S.ws.send(JSON.stringify(msg)); return true; }
    return false;
  }

  setInterval(() => send({ t: "alive" }), HEARTBEAT_MS);
  setInterval(render_link, 200);

  // ------------------------------------------------------------------ what comes in
  function take(m) {
    switch (m.t) {
      case "welcome":
        S.client = m.client; S.role = m.role; S.controller = m.controller;
        S.config = m.config; S.status = m.status; S.tick = m.tick; S.alarms = m.alarms || [];
        S.answers = (m.answers || []).slice().reverse(); S.ended = m.ended;
        break;
      case "config": S.config = m.config; break;
      case "status": S.status = m; S.alarms = m.alarms || S.alarms; break;
      case "tick": S.tick = m; S.alarms = m.alarms || S.alarms; break;
      case "answer":
        S.answers.unshift(m); S.answers.length = Math.min(S.answers.length, 12);
        break;
      case "role":
        S.role = m.role; S.controller = m.controller;
        if (m.why) S.notice = m.why;
        if (S.role !== "unpaired") $("pair-why").textContent = "";
        break;
      case "refused":
        if (m.what === "pair") $("pair-why").textContent = m.why;
        else S.notice = "refused: " + m.why;
        break;
      case "notice": S.notice = m.text; break;
      case "end": S.ended = m.why; S.alarms = m.alarms || S.alarms; break;
    }
    render();
    // an answer (or a refusal) to one of this page's requests: resolved once it is shown
    const rid = m.rid;
    if ((m.t === "answer" || (m.t === "refused" && m.what === "ask")) && S.waiting.has(rid)) {
      const w = S.waiting.get(rid);
      S.waiting.delete(rid);
      const dom = performance.now() - w.t0;   // in the page (rendered), …
      requestAnimationFrame(() => w.resolve({ answer: m, dom: dom,   // … on the screen
                                              ms: performance.now() - w.t0 }));
    }
  }

  // ------------------------------------------------------------------ requests
  function ask(req) {
    const rid = ++S.rid;
    return new Promise((resolve) => {
      S.waiting.set(rid, { resolve, t0: performance.now() });
      if (!send(Object.assign({ t: "ask", rid: rid }, req))) {
        S.waiting.delete(rid);
        resolve({ refused: "not connected" });
      }
    });
  }

  function legsOf(leg) {   // one leg (a one-leg robot): all legs
    const names = (S.config && S.config.leg_names) || [];
    return names.length <= 1 ? null : [leg];
  }

  function round(x, n) { const f = Math.pow(10, n); return Math.round(x * f) / f; }

  // ------------------------------------------------------------------ what is shown
  function fmt(x, n, unit) { return x === null || x === undefined ? "—" : x.toFixed(n) + (unit || ""); }

  function render_link() {
    const el = $("link");
    const deaf = S.ws && performance.now() - S.heard > DEAF_MS;
    el.classList.toggle("bad", !S.ws || deaf);
    el.textContent = S.ended ? "the run is over" : !S.ws ? "not connected: reconnecting…"
      : deaf ? "the PC is not heard" : "connected" + (S.client ? " as " + S.client : "");
    render_alarms();
  }

  function render_alarms() {
    const list = (S.alarms || []).slice();
    const deaf = !S.ended && (!S.ws || performance.now() - S.heard > DEAF_MS);
    if (deaf) list.splice(list.findIndex((a) => a.priority !== "high") < 0 ? list.length
      : list.findIndex((a) => a.priority !== "high"), 0,
      { priority: "medium", text: "input lost: this page does not hear the PC — a walk stops at the end of its stride" });
    const box = $("alarms");
    const html = list.map((a) => `<div class="alarm ${a.priority}"><span class="prio">${a.priority}</span>${esc(a.text)}</div>`).join("");
    if (box.innerHTML !== html) box.innerHTML = html;
  }

  function esc(s) { return String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c])); }

  function answerText(a) {
    let who = a.source ? a.source + (a.client ? " " + a.client : "") : "";
    let words = [a.answer, a.request, a.motion].filter(Boolean).join(" ");
    if (a.value !== undefined && a.request !== "start") words += " " + a.value;
    if (a.answer === "rejected") words += ": " + a.reason;
    if (a.answer === "finished" && a.posture) words += " → " + a.posture;
    if (a.note) words += " (" + a.note + ")";
    return `${fmt(a.time, 1, " s")} ${who ? "[" + who + "] " : ""}${words}`;
  }

  function render() {
    const c = S.config, st = S.status, tk = S.tick;
    document.body.className = [S.role, S.role === "unpaired" ? "unpaired" : "paired"].join(" ");
    const role = $("role");
    role.className = "badge role-" + S.role;
    role.textContent = { controller: "CONTROLS", watcher: "WATCHES", unpaired: "NOT PAIRED" }[S.role];
    const state = tk ? tk.state : "—";
    $("state").textContent = state + (tk && tk.cause ? ": " + tk.cause : "");
    $("state").className = "badge s-" + state;
    const t = tk ? tk.time : st ? st.time : null;
    const d = st ? st.duration : null;
    $("clock").textContent = t === null ? "waiting for the run" : d ? `${t.toFixed(1)} s of ${d} s` : `${t.toFixed(1)} s`;
    // the E-stop: its state and where it is, never a button
    const e = $("estop");
    if (c && !c.board) { $("estop-state").textContent = "E-stop: no board in this run"; }
    else if (tk && tk.estop !== null) {
      $("estop-state").textContent = tk.estop ? "E-stop PRESSED: motor power cut" : "E-stop released" + (tk.power ? " · motor power on" : " · motor power off");
    }
    e.classList.toggle("pressed", !!(tk && tk.estop));
    $("estop-where").textContent = c ? "E-stop: " + c.estop_where : "";
    // now
    if (st) {
      let now = st.motion ? st.motion : (st.posture || "no posture");
      if (st.motion && st.hold) now += st.go ? " (GO held)" : " (waits for GO on the crutch)";
      if (st.stopping) now += " (stopping)";
      $("posture").textContent = now;
      const p = tk && tk.progress !== null && tk.progress !== undefined ? tk.progress : st.progress;
      $("progress").style.width = p === null || p === undefined ? (st.motion ? "100%" : "0") : (100 * p).toFixed(0) + "%";
      $("strides").textContent = tk ? tk.strides : st.strides;
      $("speed").textContent = fmt(st.speed, 2, " m/s");
      $("step").textContent = fmt(st.step_length, 2, " m");
      $("go").textContent = st.go ? "held" : "released";
      $("speed-value").textContent = fmt(st.speed, 2, " m/s");
      $("step-value").textContent = fmt(st.step_length, 2, " m");
      const waits = [];
      if (st.pending) waits.push(st.pending + " waits for CONFIRM");
      if (st.go_block) waits.push("release GO on the crutch before the next motion");
      $("detail").textContent = waits.join(" · ");
      renderMotions(st);
      $("confirm").hidden = !st.pending;
      renderLevels(st);
    }
    if (tk && c) renderWindings(c, tk);
    $("who").textContent = S.controller ? (S.controller === S.client ? "this page controls (" + S.client + ")" : "page " + S.controller + " controls") : "no page controls";
    $("take").disabled = S.role === "controller";
    $("hand-over").disabled = S.role !== "controller";
    const html = S.answers.map((a) => `<li class="${a.answer}">${esc(answerText(a))}</li>`).join("");
    if ($("answers").innerHTML !== html) $("answers").innerHTML = html;
    $("notice").textContent = S.ended ? "the run is over: " + S.ended : S.notice;
    render_alarms();
  }

  function renderMotions(st) {
    const box = $("motions");
    const all = (S.config && S.config.motions) || [];
    const key = JSON.stringify([st.possible, st.needs, all.length]);
    if (box.dataset.key === key) return;
    box.dataset.key = key;
    box.innerHTML = "";
    for (const m of all) {
      const b = document.createElement("button");
      b.className = "motion";
      b.dataset.motion = m.name;
      b.id = "motion-" + m.name;
      const possible = (st.possible || []).includes(m.name);
      b.disabled = !possible;
      b.innerHTML = esc(m.name.replace("_", " ")) + (st.needs && st.needs[m.name] ? `<span class="small">${esc(st.needs[m.name])}</span>` : "");
      b.onclick = () => ask({ kind: "start", motion: m.name });
      box.appendChild(b);
    }
  }

  function renderLevels(st) {
    const box = $("levels");
    const legs = Object.keys(st.levels || {});
    if (box.dataset.key !== legs.join(",")) {
      box.dataset.key = legs.join(",");
      box.innerHTML = "";
      const names = (S.config && S.config.leg_names) || legs;
      legs.forEach((leg, i) => {
        const name = names[i] !== undefined ? names[i] : leg;
        const row = document.createElement("div");
        row.className = "adjust";
        row.innerHTML = `<span>${esc(leg)}</span><button class="step" id="level-${esc(leg)}-down">−</button><output id="level-${esc(leg)}">—</output><button class="step" id="level-${esc(leg)}-up">+</button>`;
        box.appendChild(row);
        row.querySelector(`#level-${leg}-down`).onclick = () => level(leg, name, -LEVEL_STEP);
        row.querySelector(`#level-${leg}-up`).onclick = () => level(leg, name, +LEVEL_STEP);
      });
    }
    for (const leg of legs) $("level-" + leg).textContent = (100 * st.levels[leg]).toFixed(0) + " %";
  }

  function level(leg, name, step) {
    const v = S.status.levels[leg];
    ask({ kind: "level", value: round(Math.min(1, Math.max(0, v + step)), 2), legs: legsOf(name) });
  }

  function renderWindings(c, tk) {
    const box = $("windings");
    const joints = c.joints || [];
    if (box.children.length !== joints.length) {
      box.innerHTML = joints.map((j, i) => `<div class="winding" id="winding-${i}"><span>${esc(j)}</span> <span class="w-text"></span><div class="bar"><div></div></div></div>`).join("");
    }
    joints.forEach((j, i) => {
      const el = $("winding-" + i);
      const t = tk.winding_C[i], f = tk.derate[i], warn = c.warning_C[i], lim = c.limit_C[i];
      el.querySelector(".w-text").textContent = `${t.toFixed(1)} °C` + (f < 1 ? ` · derated to ${(100 * f).toFixed(0)} %` : "");
      el.title = `warning ${warn} °C (derating from it), limit ${lim} °C (SAFE)`;
      el.classList.toggle("warm", f < 1 || t >= warn);
      el.classList.toggle("hot", t >= lim - 5);
      const lo = 20;
      el.querySelector(".bar div").style.width = Math.max(0, Math.min(100, 100 * (t - lo) / (lim - lo))).toFixed(0) + "%";
    });
  }

  // ------------------------------------------------------------------ the buttons
  function pair() { send({ t: "pair", code: $("pair-code").value.replace(/\s/g, "") }); }
  $("pair-ok").onclick = pair;
  $("pair-code").addEventListener("keydown", (e) => { if (e.key === "Enter") pair(); });
  const pad = $("keypad");
  for (const k of ["1", "2", "3", "4", "5", "6", "7", "8", "9", "⌫", "0", "✓"]) {
    const b = document.createElement("button");
    b.textContent = k;
    b.onclick = () => {
      const input = $("pair-code");
      if (k === "⌫") input.value = input.value.slice(0, -1);
      else if (k === "✓") pair();
      else if (input.value.length < 6) input.value += k;
    };
    pad.appendChild(b);
  }
  $("take").onclick = () => send({ t: "take" });
  $("hand-over").onclick = () => send({ t: "hand_over" });
  $("stop").onclick = () => ask({ kind: "stop" });
  $("confirm").onclick = () => ask({ kind: "confirm" });
  let endArmed = 0;
  $("end").onclick = () => {
    const b = $("end");
    if (performance.now() - endArmed < END_ARM_MS) {
      endArmed = 0; b.classList.remove("armed"); b.textContent = "END session";
      ask({ kind: "end" });
    } else {
      endArmed = performance.now(); b.classList.add("armed"); b.textContent = "tap again to END";
      setTimeout(() => { if (performance.now() - endArmed >= END_ARM_MS) { b.classList.remove("armed"); b.textContent = "END session"; } }, END_ARM_MS + 50);
    }
  };
  const speed = (d) => S.status && ask({ kind: "speed", value: round(S.status.speed + d, 2) });
  const step = (d) => S.status && S.status.step_length !== null && ask({ kind: "step_length", value: round(S.status.step_length + d, 2) });
  $("speed-down").onclick = () => speed(-SPEED_STEP);
  $("speed-up").onclick = () => speed(+SPEED_STEP);
  $("step-down").onclick = () => step(-STEP_STEP);
  $("step-up").onclick = () => step(+STEP_STEP);

  // what tests and tools drive: the same requests the buttons make
  window.exo = { ask: ask, send: send, state: S };
  connect();
})();
