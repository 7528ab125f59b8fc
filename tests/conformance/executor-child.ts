/** Runs the conformance executor agent in this process, served on stdin/stdout (`rpc.ts`). */
import { ExecutorAgent } from "./executor-agent.ts";
import { serveAgent } from "./rpc.ts";

const agent = new ExecutorAgent();
serveAgent(agent, () => agent.stopAll());
