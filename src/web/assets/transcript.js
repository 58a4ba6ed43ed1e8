// transcript.js: the transcript renderer, plain browser JavaScript written by hand (no build step).
// The dashboard serves it as /static/transcript.js before each page's own script; the static viewer
// (`patchbay view`) inlines it before view.js, so both render alike. Takes nothing from the page;
// defines window.PB: Transcript (renders events as they come), renderDiff, and the helpers the
// pages use (el, block, num, usd, dur, clean). Untrusted text only ever reaches the DOM through
// textContent.
(function () {
  "use strict";
  var FOLD_LINES = 40,
    FOLD_CHARS = 4000,
    PREVIEW_LINES = 8;
  // Defense in depth: the server already removed escape sequences and control characters.
  var CTRL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;
  function clean(s) {
    return String(s == null ? "" : s).replace(CTRL, "");
  }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = clean(text);
    return e;
  }
  function add(parent, child) {
    parent.appendChild(child);
    return child;
  }
  var NUM = new Intl.NumberFormat("en-US"); // one formatter: toLocaleString builds one per call
  function num(n) {
    return NUM.format(Number(n || 0));
  }
  // "1 file", "2 files": a count and its noun (the plural is the noun plus "s" unless given), as
  // count() of src/core/count.ts says it on the server; every count on a page goes through it.
  function count(n, one, many) {
    return num(n) + " " + (Number(n) === 1 ? one : many || one + "s");
  }
  // Money as usd() of src/core/money.ts says it on the server: enough digits to be true, "$0.00" for zero only.
  function usd(x) {
    x = x == null ? 0 : Number(x);
    if (!isFinite(x)) return "$?";
    if (x < 0) return "-" + usd(-x);
    if (x === 0) return "$0.00";
    if (x >= 1) return "$" + x.toFixed(2);
    var shown = x.toFixed(Math.min(4, Math.max(2, 1 - Math.floor(Math.log10(x)))));
    if (Number(shown) === 0) return "<$0.0001";
    if (Number(shown) >= 1) return "$" + x.toFixed(2);
    return "$" + shown.replace(/(\.\d\d\d*?)0+$/, "$1");
  }
  function dur(ms) {
    ms = Number(ms || 0);
    if (ms < 1000) return Math.round(ms) + " ms";
    if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
    var s = Math.round(ms / 1000);
    return Math.floor(s / 60) + "m" + String(s % 60).padStart(2, "0") + "s";
  }
  // A <pre>, or for long text a preview and the whole text folded in a <details>.
  function block(text, cls) {
    text = clean(text);
    var lines = text.split("\n");
    if (lines.length <= FOLD_LINES && text.length <= FOLD_CHARS) return el("pre", cls, text);
    var box = el("div", "folded");
    add(box, el("pre", cls, lines.slice(0, PREVIEW_LINES).join("\n").slice(0, 1200) + "\n…"));
    var d = add(box, el("details", "fold"));
    add(
      d,
      el("summary", null, "show all " + count(lines.length, "line") + " (" + count(text.length, "character") + ")"),
    );
    add(d, el("pre", cls, text));
    return box;
  }
  function json(v) {
    try {
      return JSON.stringify(v, null, 2);
    } catch (_) {
      return String(v);
    }
  }

  function renderDiff(patch) {
    var pre = el("pre", "diff");
    var lines = clean(patch).split("\n");
    if (lines.length && lines[lines.length - 1] === "") lines.pop();
    var frag = document.createDocumentFragment();
    for (var i = 0; i < lines.length; i++) {
      var l = lines[i],
        c = "";
      if (
        /^(diff --git |index |--- |\+\+\+ |new file mode|deleted file mode|similarity index|rename (from|to) |GIT binary patch)/.test(
          l,
        )
      )
        c = "file";
      else if (l.charAt(0) === "@" && l.charAt(1) === "@") c = "hunk";
      else if (l.charAt(0) === "+") c = "add";
      else if (l.charAt(0) === "-") c = "del";
      frag.appendChild(el("span", c, l === "" ? " " : l));
    }
    pre.appendChild(frag);
    return pre;
  }

  function Transcript(root, opts) {
    this.root = root;
    this.opts = opts || {};
    this.totalsEl = this.opts.totals || null;
    this.attempt = null;
    this.turns = Object.create(null); // keyed by ids from the model: no prototype to collide with
    this.tools = Object.create(null);
    this.count = 0;
    // toolCalls: every call the model asked for, counted as it appears (running ones too); running:
    // those without a result yet; responses: the model's answers so far (the cost is theirs).
    this.t = {
      turns: 0,
      input: 0,
      output: 0,
      cacheRead: 0,
      cacheWrite: 0,
      cost: 0,
      responses: 0,
      toolCalls: 0,
      running: 0,
      toolErrors: 0,
    };
    this.finished = null;
    this.runs = 0;
    this.listeners = [];
  }
  Transcript.prototype.onEvent = function (fn) {
    this.listeners.push(fn);
  };
  // Events are rendered in slices of ~30 ms, so the first screenful paints at once and a long
  // transcript never blocks the page; opts.onRendered(count, pending) follows each slice.
  Transcript.prototype.addAll = function (events) {
    this.queue = (this.queue || []).concat(events);
    if (!this.draining) this.drain();
  };
  Transcript.prototype.drain = function () {
    var t0 = performance.now(),
      q = this.queue,
      i = 0;
    this.draining = true;
    while (i < q.length && (i < 50 || performance.now() - t0 < 30)) this.add(q[i++], true);
    this.queue = q.slice(i);
    this.updateTotals();
    if (this.opts.onRendered) this.opts.onRendered(this.count, this.queue.length);
    if (this.queue.length) setTimeout(this.drain.bind(this), 0);
    else this.draining = false;
  };
  Transcript.prototype.card = function (cls, title, meta) {
    var d = el("div", "ev " + cls);
    add(d, el("span", "title", title));
    if (meta) add(d, el("span", "meta", " · " + meta));
    this.root.appendChild(d);
    return d;
  };
  Transcript.prototype.turn = function (n) {
    var key = String(n);
    var t = this.turns[key];
    if (t) return t;
    var a = el("article", "turn");
    a.setAttribute("data-turn", key);
    var h = add(a, el("header"));
    add(h, el("span", "title", "Turn " + n));
    var meta = add(h, el("span", "meta", "waiting for the model…"));
    var body = add(a, el("div", "body"));
    this.root.appendChild(a);
    t = this.turns[key] = { el: a, meta: meta, body: body };
    return t;
  };
  Transcript.prototype.tool = function (turn, id, name) {
    var x = this.tools[id];
    if (x) return x;
    var t = this.turn(turn);
    var d = add(t.body, el("div", "tool"));
    d.setAttribute("data-tool-use-id", clean(id));
    var call = add(d, el("div", "call"));
    add(call, el("span", "name", name || "tool"));
    var input = add(call, el("div", "input"));
    var result = add(d, el("div", "result"));
    add(result, el("span", "meta pending", "running…"));
    x = this.tools[id] = { el: d, input: input, result: result, filled: false };
    this.t.toolCalls++;
    this.t.running++;
    return x;
  };
  Transcript.prototype.fillInput = function (x, name, input) {
    if (x.filled) return;
    x.filled = true;
    x.input.textContent = "";
    if (input && typeof input === "object" && typeof input.command === "string" && /bash|shell/.test(name)) {
      add(x.input, block("$ " + input.command, "cmd"));
      var rest = {};
      var more = false;
      for (var k in input)
        if (k !== "command") {
          rest[k] = input[k];
          more = true;
        }
      if (more) add(x.input, block(json(rest), "json"));
      return;
    }
    if (input && typeof input === "object" && typeof input.command === "string" && typeof input.path === "string") {
      add(x.input, el("div", "summary", input.command + " " + input.path));
      for (var key in input) {
        if (key === "command" || key === "path") continue;
        var v = input[key];
        add(x.input, el("div", "meta", key));
        add(x.input, block(typeof v === "string" ? v : json(v), "json"));
      }
      return;
    }
    add(x.input, block(json(input), "json"));
  };
  Transcript.prototype.add = function (e, batch) {
    if (!e || typeof e !== "object") return;
    this.count++;
    // A new attempt, or the job run again (retry): a divider, and turn numbers start over.
    if ((e.attempt != null && e.attempt !== this.attempt) || (e.type === "job_started" && this.runs > 0)) {
      if (this.runs > 0 || e.attempt > 1)
        this.card("attempt", (this.runs > 0 ? "Run " + (this.runs + 1) + " · " : "") + "attempt " + e.attempt);
      this.attempt = e.attempt;
      this.turns = Object.create(null);
      for (var k in this.tools) if (!this.tools[k].done) this.t.running--; // the attempt before ended
      this.tools = Object.create(null);
    }
    if (e.type === "job_started") {
      this.runs++;
      this.finished = null; // a new run: its cost is "so far" again
    }
    var d;
    switch (e.type) {
      case "job_started": {
        var spec = e.spec || {};
        d = this.card(
          "",
          "Job " + (e.jobId || "") + " started",
          [spec.model ? "model " + spec.model : "", e.ts || ""].filter(Boolean).join(" · "),
        );
        if (spec.task != null) add(d, block(spec.task, "task"));
        var sd = add(d, el("details", "fold"));
        add(sd, el("summary", null, "spec"));
        add(sd, block(json(spec), "json"));
        break;
      }
      case "sandbox_ready":
        this.card("ok", "Sandbox ready", clean(e.container) + " · " + dur(e.ms));
        break;
      case "setup":
        d = this.card(e.exitCode === 0 ? "ok" : "error", "Setup", "exit " + e.exitCode + " · " + dur(e.ms));
        add(d, block("$ " + e.command, "cmd"));
        if (e.outputTail) add(d, block(e.outputTail, "out"));
        break;
      case "model_request":
        this.turn(e.turn);
        break;
      case "model_response": {
        var t = this.turn(e.turn);
        var u = e.usage || {};
        this.t.turns = Math.max(this.t.turns, Number(e.turn) || 0);
        this.t.input += u.inputTokens || 0;
        this.t.output += u.outputTokens || 0;
        this.t.cacheRead += u.cacheReadTokens || 0;
        this.t.cacheWrite += u.cacheWriteTokens || 0;
        if (typeof e.costUsd === "number") this.t.cost += e.costUsd;
        this.t.responses++;
        t.meta.textContent = clean(
          [
            e.model,
            "in " +
              num(u.inputTokens) +
              " · out " +
              num(u.outputTokens) +
              " · cache read " +
              num(u.cacheReadTokens) +
              " · cache write " +
              num(u.cacheWriteTokens),
            (typeof e.costUsd === "number" ? usd(e.costUsd) : "$?") + " (total " + usd(this.t.cost) + ")",
            dur(e.ms),
            "stop: " + e.stopReason,
          ].join(" · "),
        );
        var content = Array.isArray(e.content) ? e.content : [];
        for (var i = 0; i < content.length; i++) {
          var b = content[i] || {};
          if (b.type === "text") add(t.body, el("div", "text", b.text));
          else if (b.type === "thinking" || b.type === "redacted_thinking") {
            var th = add(t.body, el("details", "fold thinking"));
            add(th, el("summary", null, "thinking"));
            add(th, block(b.thinking || "(redacted)", "thinking"));
          } else if (b.type === "tool_use") this.fillInput(this.tool(e.turn, String(b.id), b.name), b.name, b.input);
          else add(t.body, block(json(b), "json"));
        }
        break;
      }
      case "tool_call": {
        var x = this.tool(e.turn, String(e.toolUseId), e.name);
        // An MCP tool's call names its server (the tool may be shown already, from the model's answer).
        if (e.server && !x.server)
          x.server = x.el.firstChild.insertBefore(el("span", "meta server", "MCP server " + e.server), x.input);
        this.fillInput(x, e.name, e.input);
        break;
      }
      case "tool_result": {
        var r = this.tool(e.turn, String(e.toolUseId), e.name);
        r.result.textContent = "";
        if (!r.done) this.t.running--;
        r.done = true;
        if (e.isError) {
          this.t.toolErrors++;
          r.el.className = "tool error";
          add(r.result, el("span", "mark-error", "✗ error "));
        }
        add(r.result, el("span", "meta", dur(e.ms)));
        add(r.result, block(e.output, "out"));
        break;
      }
      case "model_retry":
        this.card(
          "warn",
          "Model call retried (" + e.retry + ")",
          [e.status ? "HTTP " + e.status : "", e.delayMs != null ? "after " + dur(e.delayMs) : "", clean(e.error)]
            .filter(Boolean)
            .join(" · "),
        );
        break;
      case "context_trimmed":
        this.card(
          "warn",
          "Context trimmed",
          count(e.removedChars, "character") +
            " of older tool output elided, " +
            count(e.keptTurns, "turn", "turns") +
            " kept",
        );
        break;
      case "instructions_loaded": {
        // Repo text (the paths, the reasons): el() sets it as text, never as markup.
        d = this.card(
          e.cut || (e.refused && e.refused.length) ? "warn instructions" : "ok instructions",
          "Repository instructions",
          (e.files && e.files.length
            ? e.files.join(", ") + " · " + count(e.bytes, "byte") + (e.cut ? " · cut at the bound" : "")
            : "none in the repository") +
            (e.refused && e.refused.length ? " · " + count(e.refused.length, "file") + " left out" : ""),
        );
        (e.refused || []).forEach(function (r) {
          add(d, el("div", "meta", r.path + ": " + r.reason));
        });
        break;
      }
      case "candidates_started":
        // The job ran setup once and added its candidates, each a job of its own (its ids are repo-free, shown as text).
        d = this.card(
          "candidates",
          "Candidates started",
          count((e.jobIds || []).length, "candidate") + " from one setup · its workspace " + count(e.seedBytes, "byte"),
        );
        add(d, el("div", "meta", (e.jobIds || []).join(", ")));
        break;
      case "candidate_picked": {
        // Which candidate is the job's result and why; a line per candidate, its error as text.
        d = this.card(
          e.picked != null ? "ok candidates" : "error candidates",
          e.picked != null ? "Picked candidate " + e.picked : "No candidate picked",
          e.why,
        );
        (e.candidates || []).forEach(function (c) {
          var verified = c.verified == null ? "not verified" : c.verified ? "verified" : "verify failed";
          var line = el(
            "div",
            "meta cand-line" + (c.n === e.picked ? " picked" : ""),
            (c.n === e.picked ? "* " : "") +
              c.n +
              ". " +
              c.jobId +
              " · " +
              c.status +
              " · " +
              verified +
              " · " +
              usd(c.costUsd) +
              " · " +
              count(c.turns, "turn") +
              " · " +
              count(c.patchBytes, "byte") +
              " in " +
              count(c.filesChanged, "file") +
              (c.error ? " · " + c.error : ""),
          );
          add(d, line);
        });
        break;
      }
      case "context_compacted": {
        // The summary request's tokens count in the job's, as the result's usage does.
        var cu = e.usage || {};
        this.t.input += cu.inputTokens || 0;
        this.t.output += cu.outputTokens || 0;
        this.t.cacheRead += cu.cacheReadTokens || 0;
        this.t.cacheWrite += cu.cacheWriteTokens || 0;
        d = this.card(
          "warn compacted",
          "Context compacted (turn " + num(e.turn) + ")",
          count(e.turnsDropped, "older turn", "older turns") +
            " replaced by a summary · " +
            count(e.messagesKept, "message", "messages") +
            " kept · ~" +
            num(e.tokensBefore) +
            " → ~" +
            count(e.tokensAfter, "token") +
            (e.reason === "prompt_too_long" ? " · the API refused the request as too long" : ""),
        );
        var sf = add(d, el("details", "fold summary"));
        add(sf, el("summary", null, "summary written by the model"));
        add(sf, block(e.summary, "out"));
        break;
      }
      case "budget":
        this.card("error", "Budget exceeded", e.limit + ": " + e.used + " > " + e.max);
        break;
      case "resume":
        if (e.restored)
          this.card(
            "warn",
            "Resumed from attempt " + e.fromAttempt,
            "workspace and conversation after turn " +
              num(e.turns) +
              " restored · " +
              count(e.patchBytes, "byte") +
              " of patch · " +
              usd(e.costUsd) +
              " spent before",
          );
        else this.card("warn", "Started afresh", clean(e.reason || ""));
        break;
      case "checkpoint":
        this.card("warn", "Checkpoint not stored (turn " + e.turn + ")", clean(e.reason || ""));
        break;
      case "verify":
        d = this.card(
          e.exitCode === 0 ? "ok" : "error",
          "Verify" + (e.round ? " (round " + e.round + ")" : ""),
          (e.exitCode === 0 ? "passed" : "failed") + " · exit " + e.exitCode + " · " + dur(e.ms),
        );
        add(d, block("$ " + e.command, "cmd"));
        if (e.outputTail) add(d, block(e.outputTail, "out"));
        break;
      case "patch":
        d = this.card(
          "",
          "Patch",
          count(e.filesChangedTotal != null ? e.filesChangedTotal : (e.filesChanged || []).length, "file", "files") +
            " changed · " +
            count(e.bytes, "byte", "bytes") +
            (e.filesChangedCut ? " · the list is cut (" + count(e.filesChangedCut, "name") + " left out)" : ""),
        );
        if (e.diffstat) add(d, block(e.diffstat, "out"));
        break;
      case "job_finished":
        this.finished = e;
        // Calls the model asked for that never ran (the job ended first) are not left "running…".
        for (var id in this.tools) {
          var p = this.tools[id];
          if (p.done) continue;
          p.done = true;
          this.t.running--;
          this.t.toolCalls--; // asked for, never run: not a call
          p.result.textContent = "";
          add(p.result, el("span", "meta notrun", "not run: the job ended first"));
        }
        d = this.card(
          e.status === "completed" ? "ok finished" : "error finished",
          "Job finished: " + e.status,
          count(e.turns, "turn", "turns") + " · " + usd(e.costUsd),
        );
        d.setAttribute("data-status", clean(e.status));
        if (e.error) {
          add(d, el("span", "mark-error", "✗ "));
          add(d, block(e.error, "out"));
        }
        break;
      default:
        d = this.card("", String(e.type || "event"));
        add(d, block(json(e), "json"));
    }
    if (!batch) this.updateTotals();
    for (var j = 0; j < this.listeners.length; j++) this.listeners[j](e);
  };
  Transcript.prototype.updateTotals = function () {
    if (!this.totalsEl) return;
    var t = this.t;
    var notes = [];
    if (t.running) notes.push(num(t.running) + " running");
    if (t.toolErrors) notes.push(count(t.toolErrors, "error", "errors"));
    this.totalsEl.textContent =
      count(this.count, "event", "events") +
      " · " +
      count(t.turns, "turn", "turns") +
      " · " +
      count(t.toolCalls, "tool call", "tool calls") +
      (notes.length ? " (" + notes.join(", ") + ")" : "") +
      " · tokens in " +
      num(t.input) +
      " / out " +
      num(t.output) +
      " / cache read " +
      num(t.cacheRead) +
      " / cache write " +
      num(t.cacheWrite) +
      " · " +
      this.costText();
  };
  // The cost so far: "pending" before the model's first answer, "… so far" until the job finishes.
  Transcript.prototype.costText = function () {
    if (this.finished) return usd(this.t.cost);
    return this.t.responses ? usd(this.t.cost) + " so far" : "cost pending";
  };

  // A table cell of column `name` (the jobs and batches lists): class c-<name> (its width; its label
  // on a narrow screen, data-label). A long value is cut with an ellipsis: `title` keeps the whole.
  function cell(tr, name, cls, text, title) {
    var td = el("td", "c-" + name + (cls ? " " + cls : ""), text);
    td.setAttribute("data-label", name);
    if (title) td.title = clean(title);
    tr.appendChild(td);
    return td;
  }
  window.PB = {
    Transcript: Transcript,
    renderDiff: renderDiff,
    el: el,
    block: block,
    num: num,
    usd: usd,
    count: count,
    dur: dur,
    clean: clean,
    cell: cell,
  };
})();
