"use client";

import { MarkdownTextPrimitive, type CodeHeaderProps } from "@assistant-ui/react-markdown";
import { useState, type FC } from "react";

const CodeHeader: FC<CodeHeaderProps> = ({ language, code }) => {
  const [copied, setCopied] = useState(false);
  const copy = () => {
    void navigator.clipboard?.writeText(code).then(() => {
      setCopied(true);
      setTimeout(() => setCopied(false), 1500);
    });
  };
  return (
    <div className="code-header">
      <span>{language || "text"}</span>
      <button type="button" className="link" onClick={copy} aria-label="Copy code">
        {copied ? "Copied" : "Copy"}
      </button>
    </div>
  );
};

export const MarkdownText: FC = () => (
  <MarkdownTextPrimitive className="markdown" smooth={false} components={{ CodeHeader }} />
);
