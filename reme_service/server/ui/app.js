// The memory browser of the ReMe service (/ui): plain DOM, no framework. Every piece of memory data reaches the
// page through textContent (or a text node): never innerHTML, so stored text can never become markup or script.
"use strict";
(() => {
  const KEY = "reme_api_key";
  const $ = (id) => document.getElementById(id);
  const state = { workspace: null, cursors: [null], page: 0, next: null, memory: null, mode: "list", seq: 0,
    fresh: new Set() };
  const SORTS = { "-time_created": "newest first", "time_created": "oldest first",
    "-time_modified": "recently changed first", "memory_id": "by id" };

  // -- helpers ---------------------------------------------------------------------------------------------------

  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(props || {})) {
      if (name === "class") node.className = value;
      else if (name === "text") node.textContent = value;
      else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, value);
    }
    node.append(...children.map((c) => (c instanceof Node ? c : String(c)))); // strings become text nodes
    return node;
  }

  const plural = (n, one, many) => n + " " + (n === 1 ? one : many);
  const memoriesText = (n) => plural(n, "memory", "memories");

  function notice(text) {
    $("notice").textContent = text;
    for (const box of document.querySelectorAll(".error")) box.hidden = true;
  }

  // an error shows in the open dialog when there is one (the page behind it is covered), else at the page's top
  function showError(err) {
    const box = document.querySelector("dialog[open] .error") || $("error");
    box.textContent = err && err.message ? err.message : String(err);
    box.hidden = false;
  }

  async function api(path, options) {
    const opts = options || {};
    const headers = Object.assign({}, opts.headers || {});
    const key = sessionStorage.getItem(KEY);
    if (key) headers["Authorization"] = "Bearer " + key;
    let body = opts.body;
    if (body !== undefined && !(body instanceof Blob) && typeof body !== "string") {
      body = JSON.stringify(body);
      headers["Content-Type"] = "application/json";
    }
    const res = await fetch(path, { method: opts.method || "GET", headers, body, signal: opts.signal });
    if (!res.ok) {
      let message = res.status + " " + res.statusText;
      try {
        const data = await res.json();
        const error = data && data.metadata && data.metadata.error;
        if (error && error.message) message = res.status + ": " + error.message;
        else if (data && data.detail) message = res.status + ": " + JSON.stringify(data.detail);
      } catch (_) { /* not JSON */ }
      if (res.status === 401) message += " (enter an API key above)";
      const err = new Error(message);
      err.status = res.status;
      throw err;
    }
    return opts.raw ? res : res.json();
  }

  const wsPath = (suffix) => "/workspaces/" + encodeURIComponent(state.workspace) + suffix;

  function fieldText(value) {
    if (value === null || value === undefined) return "";
    return typeof value === "object" ? JSON.stringify(value, null, 2) : String(value);
  }

  function confirmDialog(text) {
    const dialog = $("confirm");
    $("confirm-text").textContent = text;
    return new Promise((resolve) => {
      const done = (answer) => {
        $("confirm-yes").onclick = $("confirm-no").onclick = dialog.oncancel = null;
        dialog.close();
        resolve(answer);
      };
      $("confirm-yes").onclick = () => done(true);
      $("confirm-no").onclick = () => done(false);
      dialog.oncancel = (event) => { event.preventDefault(); done(false); };
      dialog.showModal();
      $("confirm-no").focus();
    });
  }

  // -- status and workspaces -------------------------------------------------------------------------------------

  async function loadStatus() {
    const list = $("status");
    list.replaceChildren();
    try {
      const health = await api("/health");
      list.append(el("dt", { text: "status" }), el("dd", { text: health.status, "data-status": health.status }));
      for (const group of ["vector_store", "embedding_model", "llm"]) {
        for (const [name, info] of Object.entries(health[group] || {})) {
          const text = (info.backend || "") + " " + (info.status || "") + (info.reason ? " (" + info.reason + ")" : "");
          list.append(el("dt", { text: group + (name === "default" ? "" : " " + name) }), el("dd", { text }));
        }
      }
      list.append(el("dt", { text: "flows" }), el("dd", { text: String((health.flows || []).length) }));
    } catch (err) {
      list.append(el("dt", { text: "status" }), el("dd", { text: "unreachable: " + err.message }));
    }
  }

  async function loadWorkspaces() {
    const list = $("workspaces");
    try {
      // GET /workspaces is paged: read every page (500 at a time)
      const all = [];
      let cursor = null;
      do {
        const data = await api("/workspaces?limit=500" + (cursor ? "&cursor=" + encodeURIComponent(cursor) : ""));
        all.push(...data.workspaces);
        cursor = data.next_cursor;
      } while (cursor);
      list.replaceChildren();
      if (!all.length) list.append(el("li", { text: "no workspace yet" }));
      for (const ws of all) {
        const counts = Object.entries(ws.counts).filter(([, n]) => n).map(([t, n]) => n + " " + t).join(", ");
        const button = el("button", { type: "button", class: "ws", "data-workspace": ws.workspace_id,
          onclick: () => selectWorkspace(ws.workspace_id) },
          el("span", { class: "ws-name", text: ws.workspace_id }),
          el("span", { class: "ws-counts", text: memoriesText(ws.size) + (counts ? " (" + counts + ")" : "") }));
        if (ws.workspace_id === state.workspace) button.setAttribute("aria-current", "true");
        list.append(el("li", {}, button));
      }
    } catch (err) {
      list.replaceChildren();
      showError(err);
    }
  }

  function selectWorkspace(id) {
    state.workspace = id;
    state.cursors = [null];
    state.page = 0;
    $("ws-heading").textContent = "Workspace " + id;
    $("workspace-tools").hidden = false;
    $("export-link").hidden = true;
    state.fresh = new Set();
    for (const b of document.querySelectorAll("button.ws")) {
      if (b.dataset.workspace === id) b.setAttribute("aria-current", "true");
      else b.removeAttribute("aria-current");
    }
    loadPage();
    startLive();
  }

  // -- listing and search ----------------------------------------------------------------------------------------

  function memoryItem(memory) {
    const meta = [memory.memory_type, memory.memory_id, "created " + (memory.time_created || "?"),
      "modified " + (memory.time_modified || "?"), "score " + memory.score];
    if (memory.relevance !== undefined && memory.relevance !== null) {
      meta.unshift("relevance " + Number(memory.relevance).toFixed(3));
    }
    const content = String(memory.content || "");
    return el("li", { class: state.fresh.has(memory.memory_id) ? "memory fresh" : "memory",
      "data-memory-id": memory.memory_id },
      el("button", { type: "button", class: "open", onclick: () => openMemory(memory.memory_id) },
        memory.when_to_use || "(no when_to_use)"),
      el("p", { class: "meta", text: meta.join(" · ") }),
      el("p", { class: "preview", text: content.length > 240 ? content.slice(0, 240) + "…" : content }));
  }

  /** The open workspace's listing again from its first page (new filters, sort or contents). */
  function firstPage() {
    state.cursors = [null];
    state.page = 0;
    loadPage();
  }

  async function loadPage() {
    const seq = ++state.seq;
    state.mode = "list";
    const limit = Number($("page-size").value);
    const params = new URLSearchParams({ limit: String(limit), sort: $("sort").value });
    if ($("filter-type").value) params.set("memory_type", $("filter-type").value);
    if ($("filter-q").value.trim()) params.set("q", $("filter-q").value.trim());
    const cursor = state.cursors[state.page];
    if (cursor) params.set("cursor", cursor);
    try {
      const data = await api(wsPath("/memories?" + params));
      if (seq !== state.seq) return; // a newer listing or a search came meanwhile
      state.next = data.next_cursor;
      $("memories").replaceChildren(...data.memories.map(memoryItem));
      const filtered = params.has("q") || params.has("memory_type");
      const pages = Math.max(1, Math.ceil(data.total / limit));
      $("list-info").textContent = data.total
        ? memoriesText(data.total) + (filtered ? " match" : "") + ", " + SORTS[params.get("sort")]
          + (pages > 1 ? " \u00b7 page " + (state.page + 1) + " of " + pages : "")
        : "No memories" + (filtered ? " match these filters" : "");
      $("list-info").dataset.total = String(data.total);
      $("pager").hidden = pages <= 1 && state.page === 0;
      $("page-no").textContent = "Page " + (state.page + 1) + " of " + pages;
      $("prev").disabled = state.page === 0;
      $("next").disabled = !state.next;
    } catch (err) {
      showError(err);
    }
  }

  // by meaning for task and personal memories; tool memories are found by exact tool name (there is no search
  // by meaning for them), so the tool filter turns this form into a lookup of the names typed
  async function search(query) {
    const seq = ++state.seq;
    state.mode = "search";
    const type = $("filter-type").value;
    try {
      let found;
      let info;
      if (type === "tool") {
        const names = query.split(",").map((name) => name.trim()).filter(Boolean);
        const data = await api("/retrieve_tool_memory", { method: "POST",
          body: { workspace_id: state.workspace, tool_names: names } });
        found = (data.metadata && data.metadata.memory_list) || [];
        const error = data.metadata && data.metadata.error;
        if (data.success === false && !(error && error.code === "not_found")) throw new Error(data.answer);
        const missing = (data.metadata && data.metadata.not_found) || (found.length ? [] : names);
        info = plural(found.length, "tool memory", "tool memories") + " for the tool name"
          + (names.length === 1 ? "" : "s") + " \u201c" + names.join(", ") + "\u201d (found by exact name)"
          + (missing.length ? "; none for " + missing.join(", ") : "");
      } else {
        const flow = type === "personal" ? "retrieve_personal_memory" : "retrieve_task_memory";
        const data = await api("/" + flow, { method: "POST",
          body: { workspace_id: state.workspace, query, top_k: 10 } });
        found = (data.metadata && data.metadata.memory_list) || [];
        info = plural(found.length, "result", "results") + " for \u201c" + query + "\u201d, most relevant first";
      }
      if (seq !== state.seq) return;
      $("memories").replaceChildren(...found.map(memoryItem));
      $("list-info").textContent = info;
      $("pager").hidden = true;
    } catch (err) {
      showError(err);
    }
  }

  function searchMode() {
    const tool = $("filter-type").value === "tool";
    $("search-label").textContent = tool ? "Find tool memories by exact tool name" : "Search by meaning";
    $("search-q").placeholder = tool ? "tool names, comma-separated" : "a question an agent would ask";
    $("search-go").textContent = tool ? "Find" : "Search";
  }

  // -- one memory: fields, edit, create, history -----------------------------------------------------------------

  const FIRST = ["memory_id", "memory_type", "when_to_use", "content", "score", "author", "time_created",
    "time_modified"];
  const TAIL = [["author", "text"], ["score", "number"], ["metadata", "json"]];
  // the fields a person writes, per memory type, and how each is typed in
  const FIELDS = {
    task: [["when_to_use", "long"], ["content", "long"], ...TAIL],
    personal: [["when_to_use", "long"], ["content", "long"], ["target", "text"], ["reflection_subject", "text"],
      ["valid_from", "text"], ["valid_to", "text"], ...TAIL],
    tool: [["when_to_use", "text"], ["content", "long"], ["tool_call_results", "json"], ...TAIL],
  };
  const HINTS = { when_to_use: "when an agent should recall it (the embedded text)", valid_from: "YYYY-MM-DD HH:MM:SS",
    valid_to: "YYYY-MM-DD HH:MM:SS", tool_call_results: "[] or a JSON list of calls", metadata: "{} or a JSON object" };
  const fieldsOf = (type) => FIELDS[type] || FIELDS.task;

  // labelled inputs for the fields of `type` into `form`, ids `prefix + field`, filled from `memory`
  function fieldInputs(form, type, memory, prefix) {
    for (const [key, kind] of fieldsOf(type)) {
      const id = prefix + key;
      const long = kind === "long" || kind === "json";
      const input = long ? el("textarea", { id, rows: key === "content" ? "6" : "3" })
        : el("input", { id, type: kind === "number" ? "number" : "text", step: "any" });
      if (HINTS[key] || type === "tool" && key === "when_to_use") {
        input.placeholder = type === "tool" && key === "when_to_use" ? "the tool's exact name" : HINTS[key];
      }
      input.value = fieldText(memory[key]);
      const hint = type === "tool" && key === "when_to_use" ? "when_to_use (the tool name)" : key;
      form.append(el("label", { for: id, text: hint }), input);
    }
  }

  // the values typed for `type`'s fields; absent: left empty (so the service's default applies)
  function fieldValues(type, prefix) {
    const values = {};
    for (const [key, kind] of fieldsOf(type)) {
      const raw = $(prefix + key).value;
      if (kind === "number") {
        if (!raw.trim()) continue;
        const n = Number(raw);
        if (!Number.isFinite(n)) throw new Error(key + ": not a number");
        values[key] = n;
      } else if (kind === "json") {
        if (!raw.trim()) continue;
        try { values[key] = JSON.parse(raw); } catch (err) { throw new Error(key + ": " + err.message); }
      } else {
        values[key] = raw;
      }
    }
    return values;
  }

  function renderDetail(memory) {
    state.memory = memory;
    const list = $("detail-fields");
    list.replaceChildren();
    const keys = [...FIRST.filter((k) => k in memory), ...Object.keys(memory).filter((k) => !FIRST.includes(k))];
    for (const key of keys) {
      const value = memory[key];
      const dd = el("dd", { "data-field": key });
      dd.append(typeof value === "object" && value !== null ? el("pre", { text: fieldText(value) }) : fieldText(value));
      list.append(el("dt", { text: key }), dd);
    }
    $("detail-title").textContent = "Memory " + memory.memory_id;
  }

  function detailNote(text) {
    $("detail-note").textContent = text || "";
    $("detail-note").hidden = !text;
  }

  async function openMemory(id) {
    try {
      const memory = await api(wsPath("/memories/" + encodeURIComponent(id)));
      renderDetail(memory);
      setEditing(false);
      detailNote("");
      showHistory(false);
      for (const b of ["edit", "delete", "show-history"]) $(b).disabled = false;
      const dialog = $("detail");
      if (!dialog.open) dialog.showModal();
      $("close").focus();
    } catch (err) {
      showError(err);
    }
  }

  function setEditing(on) {
    $("edit-form").hidden = !on;
    $("detail-fields").hidden = on;
    $("edit").hidden = on;
    $("save").hidden = !on;
    $("cancel-edit").hidden = !on;
    if (!on) return;
    showHistory(false);
    const form = $("edit-form");
    form.replaceChildren();
    fieldInputs(form, state.memory.memory_type, state.memory, "edit-");
    form.querySelector("textarea, input").focus();
  }

  async function saveEdit() {
    const memory = state.memory;
    let values;
    try { values = fieldValues(memory.memory_type, "edit-"); } catch (err) { showError(err); return; }
    const patch = {};
    for (const [key, value] of Object.entries(values)) {
      if (JSON.stringify(value) !== JSON.stringify(memory[key] === undefined ? "" : memory[key])) patch[key] = value;
    }
    if (!Object.keys(patch).length) { setEditing(false); notice("Nothing changed"); return; }
    try {
      const updated = await api(wsPath("/memories/" + encodeURIComponent(memory.memory_id)),
        { method: "PATCH", body: patch });
      renderDetail(updated);
      setEditing(false);
      detailNote("");
      notice("Saved " + updated.memory_id);
      $("edit").focus();
      loadPage();
    } catch (err) {
      showError(err);
    }
  }

  async function deleteMemory() {
    const id = state.memory.memory_id;
    if (!(await confirmDialog("Delete memory " + id + "? This cannot be undone."))) return;
    try {
      await api(wsPath("/memories/" + encodeURIComponent(id)), { method: "DELETE" });
      $("detail").close();
      notice("Deleted " + id);
      loadPage();
      loadWorkspaces();
    } catch (err) {
      showError(err);
    }
  }

  function createFields() {
    const box = $("create-fields");
    const kept = {}; // what was typed in the fields every type has survives a change of type
    for (const key of ["when_to_use", "content", "author"]) {
      const input = $("create-" + key);
      if (input) kept[key] = input.value;
    }
    box.replaceChildren();
    fieldInputs(box, $("create-type").value, kept, "create-");
    $("create-when_to_use").required = true;
  }

  function openCreate() {
    $("create-type").value = $("filter-type").value || "task";
    $("create-fields").replaceChildren();
    createFields();
    $("create-error").hidden = true;
    $("create").showModal();
    $("create-when_to_use").focus();
  }

  async function createMemory() {
    $("create-error").hidden = true;
    const type = $("create-type").value;
    let values;
    try { values = fieldValues(type, "create-"); } catch (err) { showError(err); return; }
    const body = { memory_type: type };
    for (const [key, value] of Object.entries(values)) if (value !== "") body[key] = value;
    try {
      const created = await api(wsPath("/memories"), { method: "POST", body });
      $("create").close();
      notice("Created " + created.memory_id);
      state.fresh = new Set([created.memory_id]);
      firstPage();
      loadWorkspaces();
    } catch (err) {
      showError(err);
    }
  }

  // the history entries (GET .../history answers oldest first; shown newest first): event, when, by what, and the
  // changed fields before and after (an ADD: every field as stored)
  function historyEntry(entry) {
    const by = [entry.time, entry.flow || "?"];
    if (entry.key_id) by.push("key " + entry.key_id);
    if (entry.request_id) by.push("request " + entry.request_id);
    const item = el("li", { class: "entry", "data-event": entry.event },
      el("p", { class: "head" }, el("span", { class: "kind", text: entry.event }), by.join(" \u00b7 ")));
    const after = entry.after || {};
    const before = entry.before || {};
    const names = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
    if (names.length) {
      const changed = entry.event !== "ADD";
      const head = el("tr", {}, el("th", { scope: "col", text: "field" }),
        ...(changed ? [el("th", { scope: "col", text: "before" })] : []),
        el("th", { scope: "col", text: changed ? "after" : "value" }));
      const rows = names.map((name) => el("tr", { "data-field": name }, el("th", { scope: "row", text: name }),
        ...(changed ? [el("td", { class: "before", text: fieldText(before[name]) })] : []),
        el("td", { class: "after", text: fieldText(after[name]) })));
      item.append(el("table", {}, el("thead", {}, head), el("tbody", {}, ...rows)));
    } else if (entry.event !== "DELETE") {
      item.append(el("p", { class: "head", text: "(the fields are gone: the memory was deleted)" }));
    }
    return item;
  }

  async function showHistory(on) {
    $("history").hidden = !on;
    $("show-history").setAttribute("aria-expanded", String(on));
    $("show-history").textContent = on ? "Hide history" : "History";
    if (!on) return;
    try {
      const id = state.memory.memory_id;
      const entries = await api(wsPath("/memories/" + encodeURIComponent(id) + "/history"));
      if (!state.memory || state.memory.memory_id !== id) return;
      $("history-entries").replaceChildren(...entries.slice().reverse().map(historyEntry));
      if (!entries.length) $("history-entries").append(el("li", { text: "no history recorded" }));
    } catch (err) {
      showError(err);
    }
  }

  // -- live updates: GET /events of the open workspace -----------------------------------------------------------
  // EventSource cannot send the Authorization header, so the stream is read with fetch(); one stream at a time,
  // the open workspace's, ended (aborted) when another workspace or key is picked

  const live = { controller: null, timer: null, retry: 3000, opened: false };
  let refreshTimer = null;

  function setLive(name, text) {
    $("live").dataset.state = name;
    $("live").textContent = text;
  }

  function stopLive() {
    if (live.controller) live.controller.abort();
    live.controller = null;
    clearTimeout(live.timer);
    setLive("off", "");
  }

  // the listing and the workspaces' counts again, once for a burst of events
  function refreshSoon() {
    if (refreshTimer) return;
    refreshTimer = setTimeout(() => {
      refreshTimer = null;
      if (state.mode === "list") loadPage();
      loadWorkspaces();
    }, 100);
  }

  async function changed(event) {
    const ids = event.memory_ids || [];
    if (event.type !== "DELETE") state.fresh = new Set(ids);
    const time = String(event.time || "").slice(11, 19);
    setLive("open", "live \u00b7 " + event.type + " " + plural(ids.length, "memory", "memories")
      + (time ? " at " + time : ""));
    if (state.mode === "search" && event.type === "DELETE") {
      for (const id of ids) {
        const item = document.querySelector("#memories li[data-memory-id=\"" + CSS.escape(id) + "\"]");
        if (item) item.remove();
      }
    }
    refreshSoon();
    const open = state.memory && $("detail").open && (!ids.length || ids.includes(state.memory.memory_id));
    if (!open) return;
    if (event.type === "DELETE") {
      detailNote("This memory has been deleted.");
      for (const b of ["edit", "save", "delete", "show-history"]) $(b).disabled = true;
    } else if (!$("edit-form").hidden) {
      detailNote("This memory was changed while you edit it; saving overwrites the fields you changed.");
    } else {
      try {
        renderDetail(await api(wsPath("/memories/" + encodeURIComponent(state.memory.memory_id))));
        if (!$("history").hidden) showHistory(true);
      } catch (err) {
        showError(err);
      }
    }
  }

  // one SSE block; false ends the stream
  function onBlock(block, workspace) {
    let type = "message";
    const data = [];
    for (const line of block.split("\n")) {
      if (!line || line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "event") type = value;
      else if (field === "data") data.push(value);
      else if (field === "retry" && /^\d+$/.test(value)) {
        live.retry = Number(value);
        setLive("open", "live");
        if (live.opened) refreshSoon(); // reconnected: what changed meanwhile was not heard
        live.opened = true;
      }
    }
    if (type === "revoked") {
      setLive("stopped", "live updates stopped: this key was revoked or changed");
      return false;
    }
    if (type === "lagged") refreshSoon();
    if (["ADD", "UPDATE", "DELETE", "INVALIDATE"].includes(type) && data.length) {
      const event = JSON.parse(data.join("\n"));
      if (event.workspace_id === workspace && workspace === state.workspace) changed(event);
    }
    return true;
  }

  async function startLive(reconnect) {
    stopLive();
    if (!reconnect) live.opened = false;
    const workspace = state.workspace;
    if (!workspace) return;
    const controller = new AbortController();
    live.controller = controller;
    setLive("connecting", "connecting to live updates\u2026");
    let reason = "the stream ended";
    try {
      const res = await api("/events?workspace=" + encodeURIComponent(workspace),
        { raw: true, signal: controller.signal, headers: { Accept: "text/event-stream" } });
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer = (buffer + value).replace(/\r\n/g, "\n");
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          if (!onBlock(block, workspace)) { controller.abort(); live.controller = null; return; }
        }
      }
    } catch (err) {
      if (controller.signal.aborted) return;
      if ([401, 403, 404].includes(err.status)) {
        setLive("stopped", "no live updates (" + err.message + ")");
        live.controller = null;
        return;
      }
      reason = err.message; // 503: too many streams open on the service; a network error
    }
    if (live.controller !== controller) return;
    setLive("retrying", "live updates lost (" + reason + "); reconnecting\u2026");
    live.timer = setTimeout(() => { if (live.controller === controller) startLive(true); }, live.retry);
  }

  // -- export and import -------------------------------------------------------------------------------------------

  async function exportWorkspace() {
    try {
      const res = await api(wsPath("/export"), { raw: true });
      const blob = await res.blob();
      const text = await blob.text();
      const lines = text.split("\n").filter((line) => line.trim()).length;
      const link = $("export-link");
      if (link.href) URL.revokeObjectURL(link.href);
      link.href = URL.createObjectURL(new Blob([text], { type: "application/x-ndjson" }));
      link.download = state.workspace + ".jsonl";
      link.textContent = "Download " + state.workspace + ".jsonl";
      link.hidden = false;
      notice("Exported " + lines + " memories (" + blob.size + " bytes)");
      link.focus();
    } catch (err) {
      showError(err);
    }
  }

  async function importWorkspace() {
    const file = $("import-file").files[0];
    if (!file) { showError("choose a JSONL file first"); return; }
    if (!(await confirmDialog("Replace every memory of " + state.workspace + " with " + file.name + "?"))) return;
    try {
      const data = await api(wsPath("/import"), { method: "POST", body: file,
        headers: { "Content-Type": "application/x-ndjson" } });
      notice("Imported " + data.size + " memories into " + state.workspace);
      firstPage();
      loadWorkspaces();
    } catch (err) {
      showError(err);
    }
  }

  // -- wiring --------------------------------------------------------------------------------------------------------

  function start() {
    if (sessionStorage.getItem(KEY)) $("api-key").placeholder = "a key is set for this tab";
    $("key-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const key = $("api-key").value.trim();
      if (key) sessionStorage.setItem(KEY, key);
      $("api-key").value = "";
      $("api-key").placeholder = key ? "a key is set for this tab" : $("api-key").placeholder;
      notice(key ? "Key set for this tab" : "No key entered");
      loadWorkspaces();
      if (state.workspace) startLive();
    });
    $("key-forget").addEventListener("click", () => {
      sessionStorage.removeItem(KEY);
      $("api-key").placeholder = "rk_… (leave empty when the service needs none)";
      notice("Key forgotten");
      stopLive();
    });
    $("ws-refresh").addEventListener("click", loadWorkspaces);
    $("status-refresh").addEventListener("click", loadStatus);
    $("filter-form").addEventListener("submit", (event) => { event.preventDefault(); firstPage(); });
    $("sort").addEventListener("change", () => firstPage());
    $("filter-type").addEventListener("change", searchMode);
    $("search-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const query = $("search-q").value.trim();
      if (query) search(query); else loadPage();
    });
    $("next").addEventListener("click", () => {
      if (!state.next) return;
      state.cursors[state.page + 1] = state.next;
      state.page += 1;
      loadPage();
    });
    $("prev").addEventListener("click", () => {
      if (state.page === 0) return;
      state.page -= 1;
      loadPage();
    });
    $("edit").addEventListener("click", () => setEditing(true));
    $("cancel-edit").addEventListener("click", () => { setEditing(false); $("edit").focus(); });
    $("save").addEventListener("click", saveEdit);
    $("edit-form").addEventListener("submit", (event) => { event.preventDefault(); saveEdit(); });
    $("delete").addEventListener("click", deleteMemory);
    $("show-history").addEventListener("click", () => showHistory($("history").hidden));
    $("new-memory").addEventListener("click", openCreate);
    $("create-type").addEventListener("change", createFields);
    $("create-form").addEventListener("submit", (event) => { event.preventDefault(); createMemory(); });
    $("create-cancel").addEventListener("click", () => $("create").close());
    $("close").addEventListener("click", () => $("detail").close());
    $("export").addEventListener("click", exportWorkspace);
    $("import").addEventListener("click", importWorkspace);
    loadStatus();
    loadWorkspaces();
  }

  start();
})();
