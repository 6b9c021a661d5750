// ppdp app: the four steps, each a call to the server (which runs ppdp's own verbs).
"use strict";
const $ = (id) => document.getElementById(id);
const ROLES = ["quasi", "sensitive", "drop"];
const TYPES = ["", "numeric", "text"];
const MISSING = ["", "error", "category", "drop"];
let SOURCE = null;

function clearErrors(form) {
  document.querySelectorAll(".error").forEach((e) => { e.textContent = ""; });
}
function showError(body, fallback) {
  const field = body.field || fallback;
  let box = document.querySelector(`.error[data-for="${field}"]`) || document.querySelector(`.error[data-for="${fallback}"]`);
  box.textContent = body.error;
  box.scrollIntoView({block: "nearest"});
}
async function call(url, opts) {
  // a reply that is not the app's JSON (the server stopped, a fault) is still one line by the field
  let r;
  try { r = await fetch(url, opts); } catch (e) { return {ok: false, body: {error: "the app is not running (start `ppdp app` again)"}}; }
  try { return {ok: r.ok, body: await r.json()}; } catch (e) {
    return {ok: false, body: {error: `the app failed (HTTP ${r.status}); its terminal shows why`}};
  }
}
function postJSON(url, data) {
  return call(url, {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(data)});
}
function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}
function select(options, value) {
  const s = document.createElement("select");
  for (const o of options) { const opt = el("option", o || "—"); opt.value = o; s.appendChild(opt); }
  s.value = value || "";
  return s;
}
function input(value) { const i = document.createElement("input"); i.type = "text"; i.value = value || ""; return i; }
function fmt(v, digits) {
  if (v === null || v === undefined || v === "") return "—";
  if (typeof v === "number") return Number.isInteger(v) ? v.toLocaleString("en") : v.toFixed(digits ?? 4);
  return String(v);
}

// ------------------------------------------------------------------------------ 1 Load
function renderSchema(schema) {
  $("schema-box").hidden = false;
  const fo = $("file-opts");
  fo.innerHTML = "";
  const keys = Object.keys(schema.file || {});
  if (keys.length) {
    fo.appendChild(el("h4", "How the file is read"));
    const t = el("table"); t.id = "file-table"; t.className = "small";
    for (const k of keys) {
      const tr = el("tr");
      tr.appendChild(el("td", k));
      const td = el("td"); const i = input(schema.file[k]); i.dataset.key = k; td.appendChild(i); tr.appendChild(td);
      tr.appendChild(el("td", (schema.file_notes || {})[k] || "", "why"));
      t.appendChild(tr);
    }
    fo.appendChild(t);
  }
  const body = $("schema-table").querySelector("tbody");
  body.innerHTML = "";
  const dataset = SOURCE && SOURCE.kind === "dataset";
  for (const c of schema.columns) {
    const tr = el("tr"); tr.dataset.name = c.name;
    tr.appendChild(el("td", c.name, "name"));
    const cells = {role: select(ROLES, c.role), type: select(TYPES, c.type), bins: input(c.bins),
                   domain: input(c.domain), missing: select(MISSING, c.missing), sensitive_values: input(c.sensitive_values)};
    for (const [k, w] of Object.entries(cells)) {
      w.dataset.key = k; w.name = `${c.name}.${k}`;
      if (dataset && k !== "role") w.disabled = true;
      const td = el("td"); td.appendChild(w); tr.appendChild(td);
    }
    tr.appendChild(el("td", (c.reasons || []).join("; "), "why"));
    body.appendChild(tr);
  }
  $("download-schema").hidden = dataset;
}
function schemaRows() {
  const file = {};
  document.querySelectorAll("#file-table input").forEach((i) => { file[i.dataset.key] = i.value; });
  const columns = [];
  document.querySelectorAll("#schema-table tbody tr").forEach((tr) => {
    const row = {name: tr.dataset.name};
    tr.querySelectorAll("[data-key]").forEach((w) => { row[w.dataset.key] = w.value; });
    columns.push(row);
  });
  return {file, columns};
}
$("load-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  clearErrors();
  $("load-msg").textContent = "reading …";
  const fd = new FormData($("load-form"));
  const {ok, body} = await call("/api/load", {method: "POST", body: fd});
  $("load-msg").textContent = "";
  if (!ok) { showError(body, "file"); return; }
  SOURCE = body.source;
  $("load-msg").textContent = `${body.source.name}: ${body.message || ""}`;
  renderSchema(body.schema);
});
async function saveSchema() {
  clearErrors();
  const {ok, body} = await postJSON("/api/schema", schemaRows());
  if (!ok) { showError(body, "schema"); return false; }
  $("schema-msg").textContent = body.message;
  return true;
}
$("save-schema").addEventListener("click", saveSchema);
$("schema-file").addEventListener("change", async () => {
  clearErrors();
  const fd = new FormData(); fd.append("schema_file", $("schema-file").files[0]);
  const {ok, body} = await call("/api/schema/upload", {method: "POST", body: fd});
  $("schema-file").value = "";
  if (!ok) { showError(body, "schema_file"); return; }
  $("schema-msg").textContent = "schema file loaded";
  renderSchema(body.schema);
});

// ------------------------------------------------------------------------- jobs (polling)
async function follow(job, progressEl, cancelBtn) {
  if (cancelBtn) { cancelBtn.hidden = false; cancelBtn.onclick = () => fetch(`/api/job/${job.id}/cancel`, {method: "POST"}); }
  while (true) {
    const {ok, body} = await call(`/api/job/${job.id}`);
    if (!ok) { job = {state: "failed", error: body.error}; progressEl.textContent = ""; break; }
    job = body;
    progressEl.textContent = job.state === "running" ? (job.progress || "starting …") + `  (${job.seconds} s)` : "";
    if (job.state !== "running") break;
    await new Promise((res) => setTimeout(res, 400));
  }
  if (cancelBtn) cancelBtn.hidden = true;
  if (job.state === "cancelled") progressEl.textContent = "cancelled — nothing kept";
  return job;
}

// --------------------------------------------------------------------------- 2 Compare
$("compare-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  clearErrors();
  if ($("schema-table").querySelector("tbody tr") && !(await saveSchema())) return;
  $("report-box").hidden = true;
  const {ok, body} = await postJSON("/api/compare", {models: $("models").value, workload: $("workload").value,
    queries: $("queries").value, trials: $("trials").value, dims: $("dims").value, max_posterior: $("max_posterior").value,
    sql_workload: $("sql-workload").value});
  if (!ok) { showError(body, "models"); return; }
  $("compare-btn").disabled = true;
  const job = await follow(body, $("compare-progress"), $("cancel-btn"));
  $("compare-btn").disabled = false;
  if (job.state === "failed") { showError(job, "models"); return; }
  if (job.state !== "done") return;
  const res = job.result;
  $("report-box").hidden = false;
  $("recommendation").textContent = res.recommendation;
  const po = $("passed-over"); po.innerHTML = "";
  for (const p of res.passed_over) po.appendChild(el("li", "passed over: " + p));
  const tb = $("models-table").querySelector("tbody"); tb.innerHTML = "";
  for (const m of res.models) {
    const tr = el("tr"); if (m.model === res.recommended) tr.className = "chosen";
    for (const v of [m.model, m.family, fmt(m.max_posterior, 3), fmt(m.records_certain), fmt(m.mean_rel_err),
                     fmt(m.mean_abs_err, 2), fmt(m.publish_s, 2), String(m.verified), m.error || ""]) tr.appendChild(el("td", v));
    tb.appendChild(tr);
  }
  $("report-link").href = res.report;
  $("report-frame").src = res.report;
  if (res.recommended) $("model").value = res.to_publish || res.recommended;
});

// --------------------------------------------------------------------------- 3 Publish
function addRelease(id, label) {
  const s = $("release");
  const o = el("option", label); o.value = id; s.appendChild(o); s.value = id;
}
$("publish-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  clearErrors();
  if ($("schema-table").querySelector("tbody tr") && !(await saveSchema())) return;
  $("publish-box").hidden = true;
  const {ok, body} = await postJSON("/api/publish", {model: $("model").value, seed: $("seed").value, allow_disclosure: $("allow_disclosure").checked});
  if (!ok) { showError(body, "model"); return; }
  $("publish-btn").disabled = true;
  const job = await follow(body, $("publish-progress"), $("publish-cancel-btn"));
  $("publish-btn").disabled = false;
  if (job.state === "failed") { showError(job, "model"); return; }
  if (job.state !== "done") return;
  const r = job.result;
  $("publish-box").hidden = false;
  const v = r.verify;
  const nChecks = Array.isArray(v.checks) ? v.checks.length : v.checks;
  $("verify-result").textContent = (v.ok ? "verify: OK" : "verify: FAILED") + ` — ${nChecks} checks passed` +
    (v.ok ? "" : ": " + v.problems.join("; ")) + (r.fit_for_publication ? "; fit for publication" : "; NOT fit for publication");
  $("verify-result").className = "verdict " + (v.ok ? "ok" : "bad");
  $("claim").textContent = r.claim ? "Claim: " + r.claim : "";
  $("certificate").textContent = r.certificate_line ? "Certificate: " + r.certificate_line.replace(/^certificate:\s*/, "") : "";
  $("disclosure").textContent = r.disclosure_line ? "Disclosure: " + r.disclosure_line.replace(/^disclosure:\s*/, "") : "";
  const a = r.audit || {};
  $("audit-headline").textContent = a.error ? "audit: " + a.error : "audit: " + a.headline;
  $("audit-headline").className = "verdict " + (!a.error && a.exit === 0 ? "ok" : "bad");
  const an = $("audit-notes"); an.innerHTML = "";
  for (const n of (a.notes || [])) an.appendChild(el("li", n));
  $("audit-attacks").hidden = !(a.attacks && a.attacks.length);
  $("audit-attacks").textContent = (a.attacks || []).join("\n");
  $("audit-link").hidden = !a.report;
  if (a.report) $("audit-link").href = a.report;
  $("publish-output").textContent = r.publish_output.join("\n");
  $("zip-link").href = r.zip;
  $("custodian-box").hidden = !r.custodian;
  if (r.custodian) $("custodian-link").href = r.custodian_url;
  addRelease(r.release, `${r.release} (${r.model})`);
});

// ----------------------------------------------------------------------------- 4 Query
$("release-zip").addEventListener("change", async () => {
  clearErrors();
  const fd = new FormData(); fd.append("release_zip", $("release-zip").files[0]);
  const {ok, body} = await call("/api/release", {method: "POST", body: fd});
  $("release-zip").value = "";
  if (!ok) { showError(body, "release_zip"); return; }
  addRelease(body.release, body.release + " (uploaded)");
});
$("query-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  clearErrors();
  const {ok, body} = await postJSON("/api/query", {release: $("release").value, sql: $("sql").value, level: $("level").value});
  if (!ok) { showError(body, "sql"); return; }
  $("answer-box").hidden = false;
  const kinds = {confidence: `${body.level * 100}% confidence interval`, credible: `${body.level * 100}% credible interval`,
                 certain: "certain bounds", none: "no interval"};
  $("interval-kind").textContent = `Interval: ${kinds[body.kind] || body.kind} — ${body.method}`;
  const head = $("answer-table").querySelector("thead"); head.innerHTML = "";
  const hr = el("tr"); for (const c of body.columns) hr.appendChild(el("th", c)); head.appendChild(hr);
  const tb = $("answer-table").querySelector("tbody"); tb.innerHTML = "";
  for (const row of body.rows) {
    const tr = el("tr");
    row.forEach((v) => tr.appendChild(el("td", typeof v === "number" ? v.toFixed(2) : fmt(v), typeof v === "number" ? "num" : "")));
    tb.appendChild(tr);
  }
  $("answer-csv").href = body.csv;
});
