import type { ToolResult } from "../tool.js";

/** One item of a tool's result as an MCP server sends it (the parts Troupe reads). */
export interface McpContent {
  type: string;
  text?: string;
  /** Base64: an image's or audio clip's bytes. */
  data?: string;
  mimeType?: string;
  /** A `resource_link`'s. */
  uri?: string;
  name?: string;
  title?: string;
  description?: string;
  /** An embedded `resource`: its text, or its bytes (base64) as `blob`. */
  resource?: { uri?: string; name?: string; mimeType?: string; text?: string; blob?: string };
}

export interface McpCallResult {
  content?: McpContent[];
  isError?: boolean;
  structuredContent?: unknown;
}

/**
 * A server's result as the model reads it, nothing of it dropped without a word: text as it is; a
 * resource link with its uri, name, type and description; an embedded resource's text under a line
 * naming it, a binary one named with its type and size; an image or audio clip as a line with its
 * type and size, and an image (PNG, JPEG, GIF, WebP up to 5 MB, four a result) also as itself, shown
 * to a model that takes images. With no content, its structured content as JSON.
 */
export function mcpResult(result: McpCallResult): ToolResult {
  const parts = (result.content ?? []).map(contentText);
  const images = (result.content ?? []).filter(showable).slice(0, MAX_IMAGES);
  if (parts.length === 0 && result.structuredContent !== undefined)
    parts.push(JSON.stringify(result.structuredContent));
  const text = parts.join("\n");
  if (result.isError)
    return {
      ok: false,
      output: "",
      error: text || "the tool reported an error",
      recoveryHint: "read the error, fix the arguments or try another way",
    };
  return {
    ok: true,
    output: text,
    ...(images.length
      ? { images: images.map((i) => ({ mimeType: i.mimeType as string, data: i.data as string })) }
      : {}),
  };
}

/** The most images of one result a model that takes images is shown, and the largest (bytes). */
const MAX_IMAGES = 4;
const MAX_IMAGE_BYTES = 5 * 1024 * 1024;

/** An image a model may be shown: a raster type models take, not too big. */
function showable(item: McpContent): boolean {
  return (
    item.type === "image" &&
    /^image\/(png|jpeg|gif|webp)$/.test(item.mimeType ?? "") &&
    typeof item.data === "string" &&
    bytes(item.data) <= MAX_IMAGE_BYTES
  );
}

function contentText(item: McpContent): string {
  switch (item.type) {
    case "text":
      return item.text ?? "";
    case "resource_link": {
      const name = item.title ?? item.name;
      const about = [item.mimeType, item.description].filter(Boolean).join("; ");
      return `[resource link${name ? ` "${name}"` : ""}: ${item.uri ?? "(no uri)"}${about ? ` (${about})` : ""}]`;
    }
    case "resource": {
      const resource = item.resource ?? {};
      const name = [resource.name ? `"${resource.name}"` : undefined, resource.uri].filter(Boolean).join(" ");
      const label = `resource${name ? ` ${name}` : ""}`;
      if (resource.text !== undefined)
        return `[${label}${resource.mimeType ? ` (${resource.mimeType})` : ""}]\n${resource.text}`;
      return `[${label}: ${described(resource.mimeType, resource.blob)}, binary, not shown]`;
    }
    case "image":
    case "audio":
      return item.type === "image" && showable(item)
        ? `[image: ${described(item.mimeType, item.data)}; shown to a model that takes images, after the results]`
        : `[${item.type}: ${described(item.mimeType, item.data)}, not shown to the model]`;
    default:
      return `[${item.type}${item.mimeType ? ` ${item.mimeType}` : ""}]`;
  }
}

/** `image/png, 1.2 KB`: a type, and the size of base64 data. */
function described(mimeType: string | undefined, base64: string | undefined): string {
  const size = base64 === undefined ? undefined : bytes(base64);
  return [mimeType ?? "of unknown type", size === undefined ? undefined : formatSize(size)]
    .filter(Boolean)
    .join(", ");
}

function bytes(base64: string): number {
  const padding = base64.endsWith("==") ? 2 : base64.endsWith("=") ? 1 : 0;
  return Math.max(0, Math.floor((base64.replace(/\s/g, "").length * 3) / 4) - padding);
}

function formatSize(size: number): string {
  if (size < 1024) return `${size} bytes`;
  if (size < 1024 * 1024) return `${(size / 1024).toFixed(1)} KB`;
  return `${(size / 1024 / 1024).toFixed(1)} MB`;
}
