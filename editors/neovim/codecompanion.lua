-- pincer in Neovim through CodeCompanion.nvim (https://github.com/olimorris/codecompanion.nvim).
--
-- Format: an ACP adapter under `adapters.acp`, made with
-- `require("codecompanion.adapters").extend(base, overrides)` and chosen as
-- the chat adapter, as documented at
-- https://codecompanion.olimorris.dev/configuration/adapters-acp
-- ("Configuring ACP Adapters": `commands.default`, `defaults.auth_method`,
-- `defaults.model`, `env`). The base adapter only lends its ACP handlers;
-- every field that names an agent is replaced here.
--
-- Put this in your init.lua (or a lazy.nvim `config` function).
require("codecompanion").setup({
  adapters = {
    acp = {
      pincer = function()
        return require("codecompanion.adapters").extend("gemini_cli", {
          name = "pincer",
          formatted_name = "pincer",
          commands = {
            default = { "pincer", "acp" },
          },
          defaults = {
            -- One of the auth methods pincer announces in `initialize`:
            -- the key comes from the environment below.
            auth_method = "anthropic-api-key",
            -- pincer's `model` session config option (provider/model).
            model = "anthropic/claude-sonnet-4-5",
            mcpServers = {},
            timeout = 20000,
          },
          -- Values are the names of environment variables (or `cmd:...`)
          -- that CodeCompanion resolves before it starts pincer.
          env = {
            ANTHROPIC_API_KEY = "ANTHROPIC_API_KEY",
          },
        })
      end,
    },
  },
  interactions = {
    chat = {
      adapter = "pincer",
    },
  },
})
