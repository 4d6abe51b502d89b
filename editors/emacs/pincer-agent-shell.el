;;; pincer-agent-shell.el --- pincer in Emacs through agent-shell  -*- lexical-binding: t; -*-

;;; Commentary:
;;
;; agent-shell (https://github.com/xenodium/agent-shell) starts any ACP
;; agent from a config made with `agent-shell-make-agent-config'; its
;; `:client-maker' builds the ACP client with `agent-shell--make-acp-client'
;; (`:command', `:command-params', `:environment-variables'), exactly as the
;; agents agent-shell ships are defined (see agent-shell-pi.el and the
;; README's "Adding your own agent" in that repository).  Adding the config
;; to `agent-shell-agent-configs' lists pincer in `M-x agent-shell'.
;;
;; Load this file from your init.el after agent-shell, e.g.
;;   (with-eval-after-load 'agent-shell (load "/path/to/pincer-agent-shell.el"))
;; then run `M-x pincer-agent-shell'.

;;; Code:

(require 'agent-shell)

(defcustom pincer-agent-shell-command '("pincer" "acp")
  "Command and arguments that start pincer as an ACP agent."
  :type '(repeat string)
  :group 'agent-shell)

(defcustom pincer-agent-shell-environment
  (agent-shell-make-environment-variables
   "ANTHROPIC_API_KEY" (getenv "ANTHROPIC_API_KEY")
   "RUST_LOG" "warn")
  "Environment variables pincer starts with."
  :type '(repeat string)
  :group 'agent-shell)

(defun pincer-agent-shell-make-agent-config ()
  "The agent-shell configuration for pincer."
  (agent-shell-make-agent-config
   :identifier 'pincer
   :mode-line-name "pincer"
   :buffer-name "pincer"
   :shell-prompt "pincer> "
   :shell-prompt-regexp "pincer> "
   :client-maker (lambda (buffer)
                   (agent-shell--make-acp-client
                    :command (car pincer-agent-shell-command)
                    :command-params (cdr pincer-agent-shell-command)
                    :environment-variables pincer-agent-shell-environment
                    :context-buffer buffer))
   :install-instructions "Install pincer: cargo install --locked --path . (in a pincer checkout)."))

;;;###autoload
(defun pincer-agent-shell ()
  "Start a pincer shell."
  (interactive)
  (agent-shell--dwim :config (pincer-agent-shell-make-agent-config)
                     :new-shell t))

(add-to-list 'agent-shell-agent-configs (pincer-agent-shell-make-agent-config) t)

(provide 'pincer-agent-shell)

;;; pincer-agent-shell.el ends here
