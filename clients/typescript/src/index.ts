// reme-service-client: a typed client of the ReMe-compatible memory service.

export { ReMeClient } from "./client.js";
export type { SubmitOptions, WaitOptions } from "./client.js";
export * from "./errors.js";
export { EventStream } from "./events.js";
export type * from "./flows.js";
export type { ClientOptions } from "./http.js";
export type * from "./types.js";
