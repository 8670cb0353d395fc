// What the list pages (generations, threads) share: filters that, when
// applied, go into the URL; a status line; and pages kept in the URL too,
// page being the token of the page shown ("" for the first) and prev the
// tokens of the pages before it, so that "Previous page" needs no memory
// but the URL's, and a shared link shows the same page.
import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";

import { href } from "./route.js";

export interface Field {
  // The query parameter it sets.
  name: string;
  label: string;
  type?: "text" | "datetime-local";
  // A choice among these (and "any") rather than text.
  options?: string[];
}

interface FiltersProps {
  path: string;
  label: string;
  fields: Field[];
  values: Record<string, string>;
}

// Filters is the form of the filters in the URL: a new URL (back,
// forward, a link) makes a new form, holding its values.
export function Filters(props: FiltersProps) {
  return <FilterForm key={href(props.path, props.values)} {...props} />;
}

function FilterForm(props: FiltersProps) {
  const [values, setValues] = useState(props.values);
  const apply = (e: Event) => {
    e.preventDefault();
    location.hash = href(props.path, values);
  };
  const set = (name: string) => (e: Event) => setValues({ ...values, [name]: (e.currentTarget as HTMLInputElement).value });
  return (
    <form class="filters" onSubmit={apply} aria-label={props.label} data-testid="filters">
      {props.fields.map((f) => (
        <label key={f.name}>
          {f.label}
          <Control field={f} value={values[f.name]} onInput={set(f.name)} />
        </label>
      ))}
      <div class="buttons">
        <button type="submit" data-testid="apply">
          Apply
        </button>
        <a href={`#/${props.path}`}>Clear</a>
      </div>
    </form>
  );
}

function Control({ field, value, onInput }: { field: Field; value: string; onInput(e: Event): void }) {
  if (field.options) {
    return (
      <select name={field.name} value={value} onChange={onInput}>
        <option value="">any</option>
        {field.options.map((o) => (
          <option key={o} value={o}>
            {o}
          </option>
        ))}
      </select>
    );
  }
  const common = { name: field.name, value, onInput };
  return field.type === "datetime-local" ? <input type="datetime-local" {...common} /> : <input type="text" {...common} />;
}

// Table is a list's table: its columns named once, its rows given. On a
// narrow screen each row becomes a card, each cell's data-label naming
// its column (console.css).
export function Table(props: { caption: string; columns: string[]; testid: string; children: ComponentChildren }) {
  return (
    <table class="list" data-testid={props.testid}>
      <caption class="visually-hidden">{props.caption}</caption>
      <thead>
        <tr>
          {props.columns.map((c) => (
            <th key={c} scope="col">
              {c}
            </th>
          ))}
        </tr>
      </thead>
      <tbody>{props.children}</tbody>
    </table>
  );
}

export interface ListingProps {
  // The list's path and the filters that select it.
  path: string;
  filters: Record<string, string>;
  query: URLSearchParams;
  status: string;
  // The list's next_page_token ("" on the last page); undefined until
  // it is read.
  next?: string;
  // Names the pages' navigation, e.g. "Pages of generations".
  label: string;
  children: ComponentChildren;
}

// Listing is a list's status line, the list, and its pages.
export function Listing({ path, filters, query, status, next, label, children }: ListingProps) {
  return (
    <>
      <p id={`${path}-status`} class="status" role="status">
        {status}
      </p>
      {children}
      {next !== undefined && <Pager path={path} filters={filters} query={query} next={next} label={label} />}
    </>
  );
}

function Pager({ path, filters, query, next, label }: Omit<ListingProps, "status" | "children"> & { next: string }) {
  const page = query.get("page") ?? "";
  const prev = query.getAll("prev");
  const back = prev.length > 0 ? href(path, { ...filters, page: prev[prev.length - 1], prev: prev.slice(0, -1) }) : href(path, filters);
  const forward = next ? href(path, { ...filters, page: next, prev: [...prev, page] }) : "";
  if (!page && !forward) return null;
  return (
    <nav class="pager" aria-label={label}>
      {page && (
        <a href={back} data-testid="previous">
          Previous page
        </a>
      )}
      {forward && (
        <a href={forward} data-testid="next">
          Next page
        </a>
      )}
    </nav>
  );
}
