-- pincer in Neovim through agentic.nvim (https://github.com/carlos-algms/agentic.nvim).
--
-- Format: an entry in agentic.nvim's `acp_providers` table (`name`,
-- `command`, `args`, `env`) made the default with `provider`, as in the
-- plugin's README ("Installation" and "ACP provider configuration":
-- https://github.com/carlos-algms/agentic.nvim#-installation).
--
-- Put this in your init.lua, or pass the table as `opts` to lazy.nvim.
require("agentic").setup({
  provider = "pincer",
  acp_providers = {
    ["pincer"] = {
      name = "pincer",
      command = "pincer",
      args = { "acp" },
      env = {
        ANTHROPIC_API_KEY = os.getenv("ANTHROPIC_API_KEY"),
        RUST_LOG = "warn",
      },
    },
  },
})
