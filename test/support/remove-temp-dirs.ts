/**
 * @module Setup file: each test file's temporary directories (temp-dirs.ts) go when it finishes. Registered before
 * the file's own hooks, so it runs after them (after hooks run in reverse), once browsers and servers are closed.
 */
import { afterAll } from "vitest";
import { removeTempDirs } from "./temp-dirs.ts";

afterAll(removeTempDirs);
