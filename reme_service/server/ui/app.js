// The memory browser of the ReMe service (/ui): plain DOM, no framework. Every piece of memory data reaches the
// page through textContent (or a text node): never innerHTML, so stored text can never become markup or script.
"use strict";
(() => {
  const KEY = "reme_api_key";
  const $ = (id) => document.getElementById(id);
  const state = { workspace: null, cursors: [null], page: 0, next: null, memory: null };

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

  function notice(text) {
    $("notice").textContent = text;
    $("error").hidden = true;
  }

  function showError(err) {
    const box = $("error");
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
    const res = await fetch(path, { method: opts.method || "GET", headers, body });
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
          el("span", { class: "ws-counts", text: ws.size + " memories" + (counts ? " (" + counts + ")" : "") }));
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
    for (const b of document.querySelectorAll("button.ws")) {
      if (b.dataset.workspace === id) b.setAttribute("aria-current", "true");
      else b.removeAttribute("aria-current");
    }
    loadPage();
  }

  // -- listing and search ----------------------------------------------------------------------------------------

  function memoryItem(memory) {
    const meta = [memory.memory_type, memory.memory_id, "modified " + (memory.time_modified || "?"),
      "score " + memory.score];
    if (memory.relevance !== undefined && memory.relevance !== null) {
      meta.unshift("relevance " + Number(memory.relevance).toFixed(3));
    }
    const content = String(memory.content || "");
    return el("li", { class: "memory", "data-memory-id": memory.memory_id },
      el("button", { type: "button", class: "open", onclick: () => openMemory(memory.memory_id) },
        memory.when_to_use || "(no when_to_use)"),
      el("p", { class: "meta", text: meta.join(" · ") }),
      el("p", { class: "preview", text: content.length > 240 ? content.slice(0, 240) + "…" : content }));
  }

  async function loadPage() {
    const params = new URLSearchParams({ limit: $("page-size").value });
    if ($("filter-type").value) params.set("memory_type", $("filter-type").value);
    if ($("filter-q").value.trim()) params.set("q", $("filter-q").value.trim());
    const cursor = state.cursors[state.page];
    if (cursor) params.set("cursor", cursor);
    try {
      const data = await api(wsPath("/memories?" + params));
      state.next = data.next_cursor;
      $("memories").replaceChildren(...data.memories.map(memoryItem));
      $("list-info").textContent = data.memories.length
        ? "Page " + (state.page + 1) + ": " + data.memories.length + " memories, by id"
        : "No memories" + (params.has("q") || params.has("memory_type") ? " match these filters" : "");
      $("pager").hidden = false;
      $("page-no").textContent = "Page " + (state.page + 1);
      $("prev").disabled = state.page === 0;
      $("next").disabled = !state.next;
    } catch (err) {
      showError(err);
    }
  }

  async function search(query) {
    const type = $("filter-type").value;
    const flow = type === "personal" ? "retrieve_personal_memory" : "retrieve_task_memory";
    try {
      const data = await api("/" + flow, { method: "POST", body: { workspace_id: state.workspace, query, top_k: 10 } });
      const found = (data.metadata && data.metadata.memory_list) || [];
      $("memories").replaceChildren(...found.map(memoryItem));
      $("list-info").textContent = found.length + " results for \u201c" + query + "\u201d, most relevant first";
      $("pager").hidden = true;
    } catch (err) {
      showError(err);
    }
  }

  // -- one memory --------------------------------------------------------------------------------------------------

  const FIRST = ["memory_id", "memory_type", "when_to_use", "content", "score", "author", "time_created",
    "time_modified"];
  const EDITABLE = {
    task: ["when_to_use", "content", "author", "score", "metadata"],
    personal: ["when_to_use", "content", "target", "reflection_subject", "author", "score", "metadata"],
    tool: ["when_to_use", "content", "author", "score", "metadata"],
  };

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

  async function openMemory(id) {
    try {
      const memory = await api(wsPath("/memories/" + encodeURIComponent(id)));
      renderDetail(memory);
      setEditing(false);
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
    const form = $("edit-form");
    form.replaceChildren();
    const memory = state.memory;
    for (const key of EDITABLE[memory.memory_type] || EDITABLE.task) {
      const id = "edit-" + key;
      const long = ["when_to_use", "content", "metadata"].includes(key);
      const input = long ? el("textarea", { id, rows: key === "content" ? "6" : "3" })
        : el("input", { id, type: key === "score" ? "number" : "text", step: "any" });
      input.value = fieldText(memory[key]);
      form.append(el("label", { for: id, text: key }), input);
    }
    form.querySelector("textarea, input").focus();
  }

  async function saveEdit() {
    const memory = state.memory;
    const patch = {};
    for (const key of EDITABLE[memory.memory_type] || EDITABLE.task) {
      const raw = $("edit-" + key).value;
      let value = raw;
      if (key === "score") value = Number(raw);
      if (key === "metadata") {
        try { value = raw.trim() ? JSON.parse(raw) : {}; } catch (err) { showError("metadata: " + err.message); return; }
      }
      if (JSON.stringify(value) !== JSON.stringify(memory[key])) patch[key] = value;
    }
    if (!Object.keys(patch).length) { setEditing(false); notice("Nothing changed"); return; }
    try {
      const updated = await api(wsPath("/memories/" + encodeURIComponent(memory.memory_id)),
        { method: "PATCH", body: patch });
      renderDetail(updated);
      setEditing(false);
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
      state.cursors = [null];
      state.page = 0;
      loadPage();
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
    });
    $("key-forget").addEventListener("click", () => {
      sessionStorage.removeItem(KEY);
      $("api-key").placeholder = "rk_… (leave empty when the service needs none)";
      notice("Key forgotten");
    });
    $("ws-refresh").addEventListener("click", loadWorkspaces);
    $("status-refresh").addEventListener("click", loadStatus);
    $("filter-form").addEventListener("submit", (event) => {
      event.preventDefault();
      state.cursors = [null];
      state.page = 0;
      loadPage();
    });
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
    $("close").addEventListener("click", () => $("detail").close());
    $("export").addEventListener("click", exportWorkspace);
    $("import").addEventListener("click", importWorkspace);
    loadStatus();
    loadWorkspaces();
  }

  start();
})();
