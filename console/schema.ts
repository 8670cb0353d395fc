// What the console makes of an input request's JSON Schema: MCP's
// elicitation asks with a flat object of strings, numbers, integers,
// booleans and enums, and that is all this reads. A schema with anything
// else is not made into a form, so that nobody answers a question the
// page could not show whole.
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";

export type FieldKind = "string" | "number" | "integer" | "boolean" | "enum";

export interface Choice {
  value: string;
  title: string;
}

export interface Field {
  name: string;
  // What the label says: the schema's title, else the property's name.
  title: string;
  description: string;
  kind: FieldKind;
  required: boolean;
  // string: email, uri, date or date-time (others are taken as plain
  // text, as a server must expect from any client).
  format: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  choices: Choice[];
  default?: JsonValue;
}

// Form is a schema as fields, or why it cannot be one.
export type Form = { fields: Field[] } | { unsupported: string };

// Values are what the form's controls hold: text for inputs and selects,
// a boolean for checkboxes.
export type Values = Record<string, string | boolean>;

export function formOf(schema: JsonObject | undefined): Form {
  const props = asObject(schema?.properties);
  if (!schema || !props) return { unsupported: "it asks for no fields this console can show" };
  const required = new Set(stringsOf(schema.required));
  const fields: Field[] = [];
  for (const [name, raw] of Object.entries(props)) {
    const f = fieldOf(name, asObject(raw) ?? {}, required.has(name));
    if (typeof f === "string") return { unsupported: f };
    fields.push(f);
  }
  return { fields };
}

function fieldOf(name: string, p: JsonObject, required: boolean): Field | string {
  const choices = choicesOf(p);
  const kind = choices.length > 0 ? "enum" : p.type;
  if (kind !== "enum" && kind !== "string" && kind !== "number" && kind !== "integer" && kind !== "boolean") {
    return `its field ${name} is of a kind this console does not show (${JSON.stringify(p.type ?? null)})`;
  }
  return {
    name,
    title: typeof p.title === "string" && p.title ? p.title : name,
    description: typeof p.description === "string" ? p.description : "",
    kind,
    required,
    format: typeof p.format === "string" ? p.format : "",
    minLength: numberOf(p.minLength),
    maxLength: numberOf(p.maxLength),
    minimum: numberOf(p.minimum),
    maximum: numberOf(p.maximum),
    choices,
    default: p.default,
  };
}

// choicesOf reads an enum's values and titles in either way MCP writes
// them: enum with enumNames beside it, or oneOf (or anyOf) of
// {const, title}.
function choicesOf(p: JsonObject): Choice[] {
  const values = stringsOf(p.enum);
  if (values.length > 0) {
    const names = stringsOf(p.enumNames);
    return values.map((value, i) => ({ value, title: names[i] || value }));
  }
  const options = Array.isArray(p.oneOf) ? p.oneOf : Array.isArray(p.anyOf) ? p.anyOf : [];
  return options.flatMap((o) => {
    const c = asObject(o);
    if (typeof c?.const !== "string") return [];
    return [{ value: c.const, title: typeof c.title === "string" && c.title ? c.title : c.const }];
  });
}

function asObject(v: JsonValue | undefined): JsonObject | undefined {
  return v !== null && typeof v === "object" && !Array.isArray(v) ? v : undefined;
}

function stringsOf(v: JsonValue | undefined): string[] {
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : [];
}

function numberOf(v: JsonValue | undefined): number | undefined {
  return typeof v === "number" ? v : undefined;
}

// initialValues are the controls' first values: each field's default
// where the schema gives one.
export function initialValues(fields: Field[]): Values {
  const values: Values = {};
  for (const f of fields) {
    const d = f.default;
    if (f.kind === "boolean") values[f.name] = d === true;
    else values[f.name] = d === undefined || d === null ? "" : String(d);
  }
  return values;
}

// Checked is a form's values as an answer's content, or what is wrong
// with them, field by field.
export interface Checked {
  content: JsonObject;
  errors: Record<string, string>;
}

// check validates values against fields. An optional field left empty is
// left out of the content: the server's default, if any, fills it.
export function check(fields: Field[], values: Values): Checked {
  const content: JsonObject = {};
  const errors: Record<string, string> = {};
  for (const f of fields) {
    const v = values[f.name];
    if (typeof v === "boolean") {
      content[f.name] = v;
      continue;
    }
    if (v === undefined || v.trim() === "") {
      if (f.required) errors[f.name] = "Required.";
      continue;
    }
    const r = f.kind === "number" || f.kind === "integer" ? numberValue(f, v) : textValue(f, v);
    if (r.error) errors[f.name] = r.error;
    else content[f.name] = r.value!;
  }
  return { content, errors };
}

interface Result {
  value?: JsonValue;
  error?: string;
}

function numberValue(f: Field, text: string): Result {
  const n = Number(text.trim());
  if (!Number.isFinite(n)) return { error: "Must be a number." };
  if (f.kind === "integer" && !Number.isInteger(n)) return { error: "Must be a whole number." };
  if (f.minimum !== undefined && n < f.minimum) return { error: `Must be at least ${f.minimum}.` };
  if (f.maximum !== undefined && n > f.maximum) return { error: `Must be at most ${f.maximum}.` };
  return { value: n };
}

function textValue(f: Field, text: string): Result {
  if (f.kind === "enum") {
    return f.choices.some((c) => c.value === text) ? { value: text } : { error: "Choose one of the options." };
  }
  // JSON Schema counts a string's length in code points.
  const length = [...text].length;
  if (f.minLength !== undefined && length < f.minLength) return { error: `Must be at least ${f.minLength} characters.` };
  if (f.maxLength !== undefined && length > f.maxLength) return { error: `Must be at most ${f.maxLength} characters.` };
  return formatted(f.format, text);
}

// formatted checks the formats MCP names; a date-time control gives local
// time without a zone, sent as the instant it is here.
function formatted(format: string, text: string): Result {
  switch (format) {
    case "email":
      return /^[^\s@]+@[^\s@]+$/.test(text) ? { value: text } : { error: "Must be an email address." };
    case "uri":
      return URL.canParse(text) ? { value: text } : { error: "Must be a URL (with its scheme, e.g. https://)." };
    case "date":
      return /^\d{4}-\d{2}-\d{2}$/.test(text) && !Number.isNaN(Date.parse(text))
        ? { value: text }
        : { error: "Must be a date." };
    case "date-time": {
      const d = new Date(text);
      return Number.isNaN(d.getTime()) ? { error: "Must be a date and time." } : { value: d.toISOString() };
    }
    default:
      return { value: text };
  }
}
