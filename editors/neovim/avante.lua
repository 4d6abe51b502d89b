-- pincer in Neovim through avante.nvim (https://github.com/yetone/avante.nvim).
--
-- Format: an entry in avante's `acp_providers` table (`command`, `args`,
-- `env`) selected with `provider`, as in avante.nvim's README section
-- "ACP Support" / "Agent Client Protocol" (https://github.com/yetone/avante.nvim#acp-support).
--
-- Put this in your init.lua, or pass the table as `opts` to lazy.nvim.
require("avante").setup({
  provider = "pincer",
  acp_providers = {
    ["pincer"] = {
      command = "pincer",
      args = { "acp" },
      env = {
        ANTHROPIC_API_KEY = os.getenv("ANTHROPIC_API_KEY"),
        RUST_LOG = "warn",
      },
    },
  },
})
