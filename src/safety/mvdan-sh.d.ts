// Types for the parts of mvdan-sh (mvdan/sh compiled to JavaScript) that Troupe uses.
declare module "mvdan-sh" {
  export interface ShPos {
    Offset(): number;
  }
  export interface ShNode {
    Pos(): ShPos;
    End(): ShPos;
    [field: string]: unknown;
  }
  export interface ShParser {
    Parse(source: string, name: string): ShNode;
  }
  export interface ShSyntax {
    NewParser(): ShParser;
    NodeType(node: ShNode): string;
    Walk(node: ShNode, visit: (node: ShNode | null) => boolean): void;
  }
  /** A CommonJS module: Node exposes it as the default export only. */
  const sh: { syntax: ShSyntax };
  export default sh;
}
