// Pages of a list kept in the URL: page is the token of the page shown
// ("" for the first), prev the tokens of the pages before it, so that
// "Previous page" needs no memory but the URL's and a shared link shows
// the same page.
import { href } from "./route.js";

export interface PagerProps {
  // The list's path and the query that selects it (its filters).
  path: string;
  filters: Record<string, string>;
  page: string;
  prev: string[];
  // The list's next_page_token: "" on the last page.
  next: string;
  // Names the navigation, e.g. "Pages of generations".
  label: string;
}

export function Pager({ path, filters, page, prev, next, label }: PagerProps) {
  const first = href(path, filters);
  const back = prev.length > 0 ? href(path, { ...filters, page: prev[prev.length - 1], prev: prev.slice(0, -1) }) : first;
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
