/** @module The conformance suite against kvgate running on deno as a real process (see suite.ts). */
import { conformanceSuite } from "./suite.ts";

conformanceSuite("deno");
