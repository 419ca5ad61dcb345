/** @module Public surface of tokenization: what the gateway imports to turn request bodies into token ids. */
export type { ChatMessage, ChatRequestBody, CompletionRequestBody, ContentPart, PromptTokenizer, TokenizeNotes, TokenizerMode, ToolCall, ToolParam } from "./types.ts";
export { emptyNotes, fullBlocks } from "./types.ts";
export { createTokenizerRegistry, type TokenizerRegistry, type TokenizerRegistryOptions } from "./tokenizer-registry.ts";
export { createTextLoader, type ReadText, type TextLoaderOptions } from "./text-loader.ts";
export { PreciseTokenizer, loadPreciseTokenizer, type ModelTokenizerSource, type PreciseTokenizerInit } from "./precise-tokenizer.ts";
export { ApproximateTokenizer, bytesToTokens, renderApproximate } from "./approximate-tokenizer.ts";
