/**
 * Registers the store conformance suite (store-conformance.ts) with `node:test`: one test per
 * case, each on a fresh, empty store from `setup`.
 */
import { describe, it } from "node:test";
import { storeCases, type StoreSubject } from "./store-conformance.ts";

/** A store under test and how to clean up after it. */
export interface SubjectSetup {
  readonly subject: StoreSubject;
  dispose(): Promise<void> | void;
}

/** Runs every conformance case against stores from `setup`. */
export function runConformance(label: string, setup: () => Promise<SubjectSetup>): void {
  describe(`store conformance: ${label}`, () => {
    for (const c of storeCases) {
      it(c.name, async () => {
        const { subject, dispose } = await setup();
        try {
          await c.run(subject);
        } finally {
          await dispose();
        }
      });
    }
  });
}
