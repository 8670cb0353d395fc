// A page's state in the URL's fragment, after its route (#/mcp?tenant=acme),
// so that a link to what someone sees shows the same to whoever opens it.
import { useEffect, useState } from "preact/hooks";

function params(): URLSearchParams {
  const hash = location.hash;
  const q = hash.indexOf("?");
  return new URLSearchParams(q < 0 ? "" : hash.slice(q + 1));
}

// useHashParam is the fragment's parameter name and a setter that writes
// it there (empty: removes it), a step the browser's Back undoes.
export function useHashParam(name: string): [string, (v: string) => void] {
  const [value, setValue] = useState(() => params().get(name) ?? "");
  useEffect(() => {
    const onHash = () => setValue(params().get(name) ?? "");
    addEventListener("hashchange", onHash);
    return () => removeEventListener("hashchange", onHash);
  }, [name]);
  const set = (v: string) => {
    const p = params();
    if (v) p.set(name, v);
    else p.delete(name);
    const route = location.hash.split("?")[0] || "#/";
    const q = p.toString();
    location.hash = q ? `${route}?${q}` : route;
  };
  return [value, set];
}
