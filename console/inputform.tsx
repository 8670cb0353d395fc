// An input request (an MCP server's elicitation) answered from the
// inbox: a form made from its JSON Schema, checked here before anything
// is sent, with each error beside its field, so that a person sees what
// to fix rather than agentd's refusal of the whole answer. A URL request
// shows its address as a link. Either may be declined (the person will
// not answer) or cancelled (dismissed without choosing), as MCP's
// actions are.
import { useId, useMemo, useState } from "preact/hooks";

import { InputAction, InputMode, type InputRequest } from "../gen/ts/agentd/v1/agent_service_pb.js";
import { webURL } from "./format.js";
import type { Answer } from "./pending.js";
import { check, formOf, initialValues, type Field, type Values } from "./schema.js";

export interface InputProps {
  request: InputRequest;
  // The answer may be given: the key may decide, and the request is
  // pending.
  answerable: boolean;
  busy: boolean;
  error: string;
  onAnswer(answer: Answer): void;
}

export function InputBody({ request, answerable, busy, error, onAnswer }: InputProps) {
  return (
    <section class="input">
      {request.message && (
        <p class="message" data-testid="input-message">
          {request.message}
        </p>
      )}
      {request.mode === InputMode.URL ? (
        <UrlAnswer request={request} answerable={answerable} busy={busy} onAnswer={onAnswer} />
      ) : (
        <FormAnswer request={request} answerable={answerable} busy={busy} onAnswer={onAnswer} />
      )}
      {error && (
        <p class="error" role="alert" data-testid="decide-error">
          {error}
        </p>
      )}
    </section>
  );
}

type PartProps = Omit<InputProps, "error">;

function UrlAnswer({ request, answerable, busy, onAnswer }: PartProps) {
  const url = webURL(request.url);
  return (
    <>
      {url ? (
        <p>
          It asks you to visit{" "}
          <a href={url.href} target="_blank" rel="noopener noreferrer" data-testid="input-link">
            {url.host}
          </a>{" "}
          (a new tab).
        </p>
      ) : (
        <p>
          It asks you to visit an address that is not a web address, so it is not a link: <code>{request.url}</code>
        </p>
      )}
      {answerable && <Actions busy={busy} accept="I have visited it" onAnswer={onAnswer} />}
    </>
  );
}

function FormAnswer({ request, answerable, busy, onAnswer }: PartProps) {
  const form = useMemo(() => formOf(request.requestedSchema), [request.requestedSchema]);
  if ("unsupported" in form) {
    return (
      <>
        <p data-testid="answer-elsewhere">
          This console cannot show this form ({form.unsupported}): answer it with the CLI or the API.
        </p>
        {answerable && <Actions busy={busy} onAnswer={onAnswer} />}
      </>
    );
  }
  return <SchemaForm fields={form.fields} answerable={answerable} busy={busy} onAnswer={onAnswer} />;
}

interface SchemaFormProps {
  fields: Field[];
  answerable: boolean;
  busy: boolean;
  onAnswer(answer: Answer): void;
}

function SchemaForm({ fields, answerable, busy, onAnswer }: SchemaFormProps) {
  const [values, setValues] = useState<Values>(() => initialValues(fields));
  const [errors, setErrors] = useState<Record<string, string>>({});
  const set = (name: string, v: string | boolean) => setValues((prev) => ({ ...prev, [name]: v }));

  // The browser's own checks are off (noValidate): they would show one
  // error at a time, in the browser's words, away from the page's.
  const submit = (e: Event) => {
    e.preventDefault();
    const checked = check(fields, values);
    setErrors(checked.errors);
    const first = fields.find((f) => checked.errors[f.name]);
    if (first) {
      (e.currentTarget as HTMLFormElement).querySelector<HTMLElement>(`[name="${CSS.escape(first.name)}"]`)?.focus();
      return;
    }
    onAnswer({ case: "input", action: InputAction.ACCEPT, content: checked.content });
  };

  return (
    <form class="input-form" data-testid="input-form" noValidate onSubmit={submit}>
      {fields.some((f) => f.required) && <p class="hint">Fields marked * are required.</p>}
      <fieldset disabled={!answerable || busy}>
        {fields.map((f) => (
          <FieldControl key={f.name} field={f} value={values[f.name]} error={errors[f.name] ?? ""} onChange={set} />
        ))}
      </fieldset>
      {answerable && <Actions busy={busy} submits onAnswer={onAnswer} />}
    </form>
  );
}

interface ControlProps {
  field: Field;
  value: string | boolean;
  error: string;
  onChange(name: string, v: string | boolean): void;
}

function FieldControl({ field, value, error, onChange }: ControlProps) {
  const id = useId();
  const errorId = `${id}-error`;
  const hintId = `${id}-hint`;
  const hint = hintOf(field);
  const described = [hint && hintId, error && errorId].filter(Boolean).join(" ") || undefined;
  const common = {
    id,
    name: field.name,
    "data-testid": `field-${field.name}`,
    "aria-required": field.required,
    "aria-invalid": error !== "",
    "aria-describedby": described,
  };
  const label = (
    <label for={id}>
      {field.title}
      {field.required && (
        <span class="required" aria-hidden="true">
          {" "}
          *
        </span>
      )}
    </label>
  );
  if (field.kind === "boolean") {
    return (
      <div class="field check" data-field={field.name}>
        <input {...common} type="checkbox" checked={value === true} onChange={(e) => onChange(field.name, e.currentTarget.checked)} />
        {label}
        <Help hintId={hintId} hint={hint} errorId={errorId} error={error} />
      </div>
    );
  }
  const text = typeof value === "string" ? value : "";
  return (
    <div class="field" data-field={field.name}>
      {label}
      {field.kind === "enum" ? (
        <select {...common} value={text} onChange={(e) => onChange(field.name, e.currentTarget.value)}>
          <option value="">{field.required ? "Choose…" : "(none)"}</option>
          {field.choices.map((c) => (
            <option key={c.value} value={c.value}>
              {c.title}
            </option>
          ))}
        </select>
      ) : (
        <input {...common} {...inputKind(field)} value={text} onInput={(e) => onChange(field.name, e.currentTarget.value)} />
      )}
      <Help hintId={hintId} hint={hint} errorId={errorId} error={error} />
    </div>
  );
}

function Help({ hintId, hint, errorId, error }: { hintId: string; hint: string; errorId: string; error: string }) {
  return (
    <>
      {hint && (
        <p class="hint" id={hintId}>
          {hint}
        </p>
      )}
      {error && (
        <p class="error field-error" id={errorId} data-testid="field-error">
          {error}
        </p>
      )}
    </>
  );
}

// inputKind is the control a field is typed in: the browser's keyboard
// and picker for its kind, without the browser's own limits, which the
// page checks itself.
function inputKind(f: Field): Record<string, string> {
  if (f.kind === "number" || f.kind === "integer") return { type: "text", inputMode: f.kind === "integer" ? "numeric" : "decimal" };
  switch (f.format) {
    case "email":
      return { type: "email", autoComplete: "email" };
    case "uri":
      return { type: "url" };
    case "date":
      return { type: "date" };
    case "date-time":
      return { type: "datetime-local" };
    default:
      return { type: "text" };
  }
}

// hintOf says what the field wants, beside the server's description: its
// limits, as the check enforces them.
function hintOf(f: Field): string {
  const limits: string[] = [];
  if (f.minLength !== undefined && f.maxLength !== undefined) limits.push(`${f.minLength} to ${f.maxLength} characters`);
  else if (f.minLength !== undefined) limits.push(`at least ${f.minLength} characters`);
  else if (f.maxLength !== undefined) limits.push(`at most ${f.maxLength} characters`);
  if (f.minimum !== undefined && f.maximum !== undefined) limits.push(`from ${f.minimum} to ${f.maximum}`);
  else if (f.minimum !== undefined) limits.push(`at least ${f.minimum}`);
  else if (f.maximum !== undefined) limits.push(`at most ${f.maximum}`);
  if (f.kind === "integer") limits.push("a whole number");
  if (f.format === "email" || f.format === "uri") limits.push(f.format === "email" ? "an email address" : "a URL");
  const rule = limits.length > 0 ? `${limits.join(", ")}.` : "";
  return [f.description, rule && rule[0].toUpperCase() + rule.slice(1)].filter(Boolean).join(" ");
}

function Actions({ busy, submits, accept, onAnswer }: { busy: boolean; submits?: boolean; accept?: string; onAnswer(a: Answer): void }) {
  const answer = (action: InputAction) => () => onAnswer({ case: "input", action });
  return (
    <div class="buttons" role="group" aria-label="Answer" aria-busy={busy}>
      {submits && (
        <button type="submit" class="primary" data-testid="input-accept" disabled={busy}>
          Send
        </button>
      )}
      {accept && (
        <button type="button" class="primary" data-testid="input-accept" disabled={busy} onClick={answer(InputAction.ACCEPT)}>
          {accept}
        </button>
      )}
      <button type="button" class="decline" data-testid="input-decline" disabled={busy} onClick={answer(InputAction.DECLINE)}>
        Decline
      </button>
      <button type="button" data-testid="input-cancel" disabled={busy} onClick={answer(InputAction.CANCEL)}>
        Cancel
      </button>
    </div>
  );
}
