// A list+watch cache of one resource, as client-go's Reflector and Indexer keep one
// (k8s.io/client-go/tools/cache/reflector.go): LIST, then WATCH from the list's
// resourceVersion over a streaming fetch of newline-delimited WatchEvents; a watch that ends
// is reopened from the last resourceVersion seen (BOOKMARKs keep it current); a 410 Gone
// (the revision was compacted) means LIST again.

/** Reads a JSON body, or throws an Error carrying the Status message and HTTP code. */
export async function getJSON(path, init) {
  const res = await fetch(path, { headers: { Accept: "application/json" }, ...init });
  const text = await res.text();
  let body;
  try {
    body = text ? JSON.parse(text) : {};
  } catch {
    body = { message: text };
  }
  if (!res.ok) {
    const err = new Error(body.message || `${res.status} ${res.statusText}`);
    err.code = res.status;
    throw err;
  }
  return body;
}

function keyOf(o) {
  const m = o.metadata || {};
  return m.namespace ? `${m.namespace}/${m.name}` : m.name;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** One resource's objects, kept current while started. */
export class Informer {
  /** `path` is the collection's URL (`/api/v1/pods`); `onChange` runs after every change. */
  constructor(path, onChange) {
    this.path = path;
    this.onChange = onChange;
    this.items = new Map();
    this.synced = false;
    this.error = null;
    this.abort = null;
  }

  /** The objects, in no particular order. */
  list() {
    return [...this.items.values()];
  }

  start() {
    if (this.abort) return;
    this.abort = new AbortController();
    this.run(this.abort.signal);
  }

  stop() {
    if (this.abort) this.abort.abort();
    this.abort = null;
  }

  async run(signal) {
    let backoff = 250;
    while (!signal.aborted) {
      try {
        const list = await getJSON(this.path, { signal });
        this.items = new Map(list.items.map((o) => [keyOf(o), o]));
        this.rv = list.metadata.resourceVersion;
        this.synced = true;
        this.error = null;
        this.onChange();
        await this.watch(signal);
        backoff = 250;
      } catch (e) {
        if (signal.aborted) return;
        this.error = e;
        this.onChange();
        await sleep(backoff);
        backoff = Math.min(backoff * 2, 5000);
      }
    }
  }

  /** Watches until the server says the revision is gone (then returns, to relist). */
  async watch(signal) {
    while (!signal.aborted) {
      const url = `${this.path}?watch=1&allowWatchBookmarks=true&timeoutSeconds=300&resourceVersion=${this.rv}`;
      const res = await fetch(url, { headers: { Accept: "application/json" }, signal });
      if (res.status === 410) return;
      if (!res.ok) throw new Error(`watch ${this.path}: ${res.status}`);
      const reader = res.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let nl;
        while ((nl = buffer.indexOf("\n")) >= 0) {
          const line = buffer.slice(0, nl).trim();
          buffer = buffer.slice(nl + 1);
          if (line && this.apply(JSON.parse(line)) === "gone") return;
        }
      }
    }
  }

  apply(event) {
    const o = event.object || {};
    switch (event.type) {
      case "ADDED":
      case "MODIFIED":
        this.items.set(keyOf(o), o);
        break;
      case "DELETED":
        this.items.delete(keyOf(o));
        break;
      case "BOOKMARK":
        break;
      case "ERROR":
        if (o.code === 410) return "gone";
        throw new Error(o.message || "watch error");
      default:
        return undefined;
    }
    if (o.metadata && o.metadata.resourceVersion) this.rv = o.metadata.resourceVersion;
    if (event.type !== "BOOKMARK") this.onChange();
    return undefined;
  }
}
