/**
 * Local failures of the agent capability on the harness end: things decided on this side that
 * never crossed the wire. Wire errors stay the contract's generated classes.
 */
import { LocalError } from "../../protocol/errors.ts";

/** The platform was not given to a `Harness` (`new Harness({ agent: platform })`) yet. */
export class AgentPlatformDetachedError extends LocalError {
  constructor() {
    super("the agent platform is not attached to a Harness");
    this.name = "AgentPlatformDetachedError";
  }
}
