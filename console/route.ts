// Where the console is: the URL's fragment names the page and holds its
// state (#/generations?state=running&page=TOKEN, #/generations/ID), so
// that a link to what one person sees shows another the same, the
// browser's back and forward move between states, and a reload keeps
// them.
import { useEffect, useState } from "preact/hooks";

export interface Location {
  // The path after "#/", e.g. "generations/ID" ("" for none).
  path: string;
  // The query after the path's "?".
  query: URLSearchParams;
}

export function parse(hash: string): Location {
  const [path, query = ""] = hash.replace(/^#\/?/, "").split("?", 2);
  return { path: path.replace(/\/+$/, ""), query: new URLSearchParams(query) };
}

// href is the fragment of path with query, leaving out empty values, for
// an <a href> or location.hash.
export function href(path: string, query?: Record<string, string | string[] | undefined>): string {
  const q = new URLSearchParams();
  for (const [name, value] of Object.entries(query ?? {})) {
    for (const v of Array.isArray(value) ? value : [value]) {
      if (v !== undefined && (v !== "" || Array.isArray(value))) q.append(name, v);
    }
  }
  const s = q.toString();
  return `#/${path}${s ? `?${s}` : ""}`;
}

// match reports the parameters of pattern (segments, ":name" taking
// any one) in path, or undefined when path is not of it.
export function match(pattern: string, path: string): Record<string, string> | undefined {
  const want = pattern.split("/");
  const got = path.split("/");
  if (want.length !== got.length) return undefined;
  const params: Record<string, string> = {};
  for (let i = 0; i < want.length; i++) {
    if (want[i].startsWith(":")) {
      if (!got[i]) return undefined;
      params[want[i].slice(1)] = decodeURIComponent(got[i]);
    } else if (want[i] !== got[i]) {
      return undefined;
    }
  }
  return params;
}

export function useLocation(): Location {
  const [loc, setLoc] = useState(() => parse(location.hash));
  useEffect(() => {
    const onHash = () => setLoc(parse(location.hash));
    addEventListener("hashchange", onHash);
    return () => removeEventListener("hashchange", onHash);
  }, []);
  return loc;
}
