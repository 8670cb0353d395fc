// What the pages past the inbox are made of: a main landmark whose
// heading takes the focus as the page opens (a screen reader says where
// it moved to), the line where a failure is said, and one call to agentd
// asked again whenever what it depends on changes.
import type { ComponentChildren } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";

import { failure, type Failure } from "./api.js";

export function Page(props: { heading: ComponentChildren; wide?: boolean; error: string; children: ComponentChildren }) {
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => heading.current?.focus(), []);
  return (
    <main id="main" class={props.wide ? "wide" : undefined}>
      <h1 ref={heading} tabIndex={-1}>
        {props.heading}
      </h1>
      <p id="error" class="error" role="alert">
        {props.error}
      </p>
      {props.children}
    </main>
  );
}

// useAnswer calls ask whenever key changes (a string naming what it
// asks), aborting the call before, and keeps the last answer (until the
// next arrives, so a list does not blink) and the failure of the last
// call, if it failed.
export function useAnswer<T>(ask: (signal: AbortSignal) => Promise<T>, key: string): { answer?: T; failed?: Failure } {
  const [answer, setAnswer] = useState<T | undefined>();
  const [failed, setFailed] = useState<Failure | undefined>();
  useEffect(() => {
    const ctl = new AbortController();
    ask(ctl.signal).then(
      (a) => {
        setAnswer(a);
        setFailed(undefined);
      },
      (err) => ctl.signal.aborted || setFailed(failure(err)),
    );
    return () => ctl.abort();
  }, [key]);
  return { answer, failed };
}
