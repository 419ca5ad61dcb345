/** @module Template plumbing: content-format detection, named templates, raise_exception, kwargs layering, globals. */
import { describe, expect, it } from "vitest";
import { ChatTemplate, specialTokenVariables } from "../../src/tokenize/chat-template.ts";
import { detectContentFormat } from "../../src/tokenize/content-format.ts";
import { strftime } from "../../src/tokenize/template-runtime.ts";
import { qwen3Files } from "./helpers.ts";

const PARTS_TEMPLATE =
  "{% for message in messages %}[{{ message.role }}]{% for part in message['content'] %}{% if part.type == 'text' %}{{ part.text }}{% else %}<{{ part.type }}>{% endif %}{% endfor %}{% endfor %}";

describe("chat template plumbing", () => {
  it("should detect string content for Qwen3 and typed parts for templates that loop over content", () => {
    expect(detectContentFormat(qwen3Files().tokenizerConfig.chat_template as string)).toBe("string");
    expect(detectContentFormat(PARTS_TEMPLATE)).toBe("openai");
    expect(detectContentFormat("{% set loop_messages = messages[1:] %}{% for m in loop_messages %}{% for c in m.content %}{{ c.text }}{% endfor %}{% endfor %}")).toBe("openai");
    expect(detectContentFormat("{% for m in messages %}{% for x in other.content %}{% endfor %}{% endfor %}")).toBe("string");
  });

  it("should hand typed parts to an openai-format template, media as {type}", () => {
    const t = new ChatTemplate(PARTS_TEMPLATE);
    expect(t.contentFormat).toBe("openai");
    const out = t.render({ messages: [{ role: "user", content: [{ type: "text", text: "a" }, { type: "image_url", image_url: { url: "x" } }] }, { role: "assistant", content: "b" }] });
    expect(out).toBe("[user]a<image>[assistant]b");
  });

  it("should pick the tool_use template only when tools are passed", () => {
    const t = new ChatTemplate([{ name: "default", template: "D" }, { name: "tool_use", template: "T{{ tools|length }}" }]);
    expect(t.render({ messages: [] })).toBe("D");
    expect(t.render({ messages: [], tools: [{ type: "function", function: { name: "f" } }] })).toBe("T1");
  });

  it("should answer a template's raise_exception with a 400 and its own failures with KVGATE_ERR_TOKENIZER", () => {
    const strict = new ChatTemplate("{% if messages[0].role != 'user' %}{{ raise_exception('Conversation must start with user') }}{% endif %}ok");
    expect(strict.render({ messages: [{ role: "user", content: "x" }] })).toBe("ok");
    expect(() => strict.render({ messages: [{ role: "assistant", content: "x" }] })).toThrow(
      expect.objectContaining({ code: "KVGATE_ERR_BAD_ARGUMENT", message: "Conversation must start with user" }),
    );
    const broken = new ChatTemplate("{{ messages|no_such_filter }}");
    expect(() => broken.render({ messages: [] })).toThrow(expect.objectContaining({ code: "KVGATE_ERR_TOKENIZER" }));
    expect(() => new ChatTemplate("{% for %}")).toThrow(expect.objectContaining({ code: "KVGATE_ERR_TOKENIZER" }));
  });

  it("should layer special tokens < server defaults < request kwargs and keep documents defined", () => {
    const t = new ChatTemplate("{{ bos_token }}|{{ eos_token }}|{{ mode }}|{{ documents is none }}|{{ flag }}", {
      specialTokens: specialTokenVariables({ bos_token: { content: "<s>", __type: "AddedToken" }, eos_token: "</s>", unk_token: null }),
      defaultKwargs: { mode: "server", flag: "default" },
    });
    expect(t.render({ messages: [] })).toBe("<s>|</s>|server|true|default");
    expect(t.render({ messages: [], chat_template_kwargs: { mode: "client", eos_token: "E", flag: null } })).toBe("<s>|E|client|true|default");
  });

  it("should strip {% generation %} tags, which only mark assistant tokens, keeping their body", () => {
    const t = new ChatTemplate("{% for m in messages %}{% generation %}{{ m.content }}{% endgeneration %}|{% endfor %}");
    expect(t.render({ messages: [{ role: "assistant", content: "a" }, { role: "assistant", content: "b" }] })).toBe("a|b|");
  });

  it("should give templates Python's range and a C-locale strftime_now", () => {
    const t = new ChatTemplate("{% for i in range(3) %}{{ i }}{% endfor %} {{ strftime_now('%d %b %Y') }}", { now: () => new Date(2026, 0, 5, 9, 7) });
    expect(t.render({ messages: [] })).toBe("012 05 Jan 2026");
    expect(strftime(new Date(2026, 6, 26, 14, 3, 9), "%A %B %e %H:%M:%S %I%p %j %%")).toBe("Sunday July 26 14:03:09 02PM 207 %");
  });
});
