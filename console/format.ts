// How the console writes values for people: JSON indented, spans of time
// in the largest units that matter, instants in the reader's time zone,
// and which addresses may be links.
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";

// prettyJSON indents text when it is JSON and gives it back as it came
// when it is not: a tool's arguments are shown either way. It indents
// the text itself rather than what JSON.parse makes of it, so that the
// person deciding sees the arguments the tool will get: a number beyond
// a double's precision, or a key given twice, is shown as written. Only
// strings are written anew, as JSON.stringify does (\u003c as <).
export function prettyJSON(text: string): string {
  try {
    JSON.parse(text);
  } catch {
    return text;
  }
  let out = "";
  let depth = 0;
  const line = () => "\n" + "  ".repeat(depth);
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      const end = stringEnd(text, i);
      out += JSON.stringify(JSON.parse(text.slice(i, end)));
      i = end - 1;
    } else if (c === "{" || c === "[") {
      const j = skipSpace(text, i + 1);
      if (text[j] === "}" || text[j] === "]") {
        out += c + text[j];
        i = j;
      } else {
        depth++;
        out += c + line();
      }
    } else if (c === "}" || c === "]") {
      depth--;
      out += line() + c;
    } else if (c === ",") {
      out += "," + line();
    } else if (c === ":") {
      out += ": ";
    } else if (!isSpace(c)) {
      out += c;
    }
  }
  return out;
}

function isSpace(c: string): boolean {
  return c === " " || c === "\t" || c === "\n" || c === "\r";
}

function skipSpace(text: string, i: number): number {
  while (i < text.length && isSpace(text[i])) i++;
  return i;
}

// stringEnd is the index after the JSON string that opens at text[i].
function stringEnd(text: string, i: number): number {
  for (let j = i + 1; j < text.length; j++) {
    if (text[j] === "\\") j++;
    else if (text[j] === '"') return j + 1;
  }
  return text.length;
}

export function dateOf(ts: Timestamp | undefined): Date | undefined {
  return ts ? timestampDate(ts) : undefined;
}

const units: [number, string][] = [
  [86_400_000, "d"],
  [3_600_000, "h"],
  [60_000, "min"],
  [1_000, "s"],
];

// span writes ms in its largest unit and the next one down ("2 h 5 min",
// "40 s"), leaving out a zero.
export function span(ms: number): string {
  const left = Math.max(0, Math.floor(ms));
  const i = units.findIndex(([size]) => left >= size);
  if (i < 0) return "0 s";
  const [size, name] = units[i];
  const whole = `${Math.floor(left / size)} ${name}`;
  const next = units[i + 1];
  const rest = next ? Math.floor((left % size) / next[0]) : 0;
  return rest ? `${whole} ${rest} ${next[1]}` : whole;
}

const clock = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });

export function instant(d: Date): string {
  return clock.format(d);
}

// webURL is text as a link's address when it is an http or https URL,
// and undefined otherwise: a server's javascript: or data: URL is never a
// link.
export function webURL(text: string): URL | undefined {
  try {
    const u = new URL(text);
    return u.protocol === "https:" || u.protocol === "http:" ? u : undefined;
  } catch {
    return undefined;
  }
}
