// How the console writes values for people: JSON indented, spans of time
// in the largest units that matter, instants in the reader's time zone.
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";

// prettyJSON indents text when it is JSON and gives it back as it came
// when it is not: a tool's arguments are shown either way.
export function prettyJSON(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
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
