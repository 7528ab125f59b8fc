/**
 * bma-executor-sdk: the TypeScript SDK of the BMA Executor Protocol (`bma.executor.v1.1`).
 *
 * @module
 */
export * from "./protocol/mod.ts";
export * from "./transport/mod.ts";
